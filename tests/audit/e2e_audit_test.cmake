# The end-to-end audit (issue 23 item 4): rff_embedding releases over a real
# gRPC channel from an in-process server (tests/server's fixture).
target_sources(audit_e2e_audit_test PRIVATE ${PROJECT_SOURCE_DIR}/tests/server/server_test_util.cc)
target_link_libraries(audit_e2e_audit_test PRIVATE dpc_server dpc_client)
