#!/bin/sh
# Makes a private CA, a server certificate and a client certificate with the
# openssl command-line tool (EC P-256), for dpcurator-server's --tls-cert,
# --tls-key and --tls-client-ca and the client's --tls-ca, --tls-cert,
# --tls-key. For tests and small deployments; use your own PKI where you
# have one.
#
#   deploy/tls.sh OUT_DIR [SERVER_NAME] [DAYS]
#   dpcurator-server ... --tls-cert OUT_DIR/server.pem --tls-key OUT_DIR/server.key \
#       --tls-client-ca OUT_DIR/ca.pem
#   dpcurator ... --tls-ca OUT_DIR/ca.pem --tls-cert OUT_DIR/client.pem --tls-key OUT_DIR/client.key
set -eu
out=${1:?usage: deploy/tls.sh OUT_DIR [SERVER_NAME] [DAYS]}
name=${2:-localhost}
days=${3:-365}
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
mkdir -p "$out"
cd "$out"
umask 077
printf 'subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
  "$name" > server.ext
printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' > client.ext
openssl req -x509 $key -keyout ca.key -out ca.pem -days "$days" -subj "/CN=dpcurator CA"
openssl req $key -keyout server.key -out server.csr -subj "/CN=$name"
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
  -extfile server.ext -out server.pem
openssl req $key -keyout client.key -out client.csr -subj "/CN=dpcurator client"
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
  -extfile client.ext -out client.pem
rm -f server.csr client.csr server.ext client.ext
echo "wrote $out/{ca,server,client}.{pem,key}; keep ca.key offline"
