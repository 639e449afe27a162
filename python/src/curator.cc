// dpcurator.Curator: the runner's three server calls (issue 28 item 3;
// docs/scale-out.md "The runner"), over the CLI's own connection
// (client/connection.h: the same TLS options, environment variables and
// deadlines as `dpcurator`), with a curator token. The statistic a submit
// carries is the merged partial's exact statistic: it goes to the server
// over the connection and nowhere else.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/connection.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/errors.h"
#include "python/src/partials.h"

namespace dpcurator::python {
namespace {

namespace py = pybind11;

class Curator {
 public:
  // `arguments`: the CLI's connection options (--server, --token,
  // --insecure, --tls-ca, --tls-cert, --tls-key, --deadline), each falling
  // back to its DPCURATOR_* variable as in the CLI.
  explicit Curator(const std::vector<std::string>& arguments) {
    absl::StatusOr<client::ParsedArgs> args =
        client::ParseArgs(client::ConnectionOptions(), arguments);
    if (!args.ok()) RaiseStatus(args.status());
    absl::StatusOr<client::Connection> connection = client::Connection::FromArgs(*args);
    if (!connection.ok()) RaiseStatus(connection.status());
    connection_ = *std::move(connection);
  }

  const std::string& address() const { return connection_.address(); }

  py::list PendingJobs(const std::string& dataset_id) {
    v1::ListPendingJobsRequest request;
    request.set_dataset_id(dataset_id);
    v1::ListPendingJobsResponse response;
    Call([&](grpc::ClientContext* context) {
      return connection_.runner().ListPendingJobs(context, request, &response);
    }, "ListPendingJobs");
    py::list jobs;
    for (const v1::PendingJob& job : response.jobs()) {
      py::dict entry;
      entry["job_id"] = job.job_id();
      entry["dataset_id"] = job.dataset_id();
      entry["kind"] = v1::ReleaseKind_Name(job.kind());
      entry["schema"] = py::bytes(job.schema());
      entry["request"] = py::bytes(job.request());
      entry["plan_digest"] = py::bytes(job.plan_digest());
      entry["created_unix"] = job.created_unix();
      jobs.append(std::move(entry));
    }
    return jobs;
  }

  // The release as the server stored it (state DONE), as a dict of its
  // public fields: the artefact is not echoed.
  py::dict Submit(const std::string& job_id, const std::string& dataset_id,
                  const Partial& partial) {
    v1::SubmitStatisticRequest request;
    request.set_job_id(job_id);
    request.set_dataset_id(dataset_id);
    request.set_plan_digest(partial.plan_digest);
    request.mutable_statistic()->Reserve(static_cast<int>(partial.values.size()));
    for (Eigen::Index i = 0; i < partial.values.size(); ++i) {
      request.add_statistic(partial.values[i]);
    }
    request.set_rows(partial.num_rows);
    v1::SubmitStatisticResponse response;
    Call([&](grpc::ClientContext* context) {
      return connection_.runner().SubmitStatistic(context, request, &response);
    }, "SubmitStatistic");
    py::dict release;
    release["release_id"] = response.release().id();
    release["dataset_id"] = response.release().dataset_id();
    release["kind"] = v1::ReleaseKind_Name(response.release().kind());
    release["state"] = v1::ReleaseState_Name(response.release().state());
    return release;
  }

  void Fail(const std::string& job_id, const std::string& dataset_id, const std::string& reason) {
    v1::FailJobRequest request;
    request.set_job_id(job_id);
    request.set_dataset_id(dataset_id);
    request.set_reason(reason);
    v1::FailJobResponse response;
    Call([&](grpc::ClientContext* context) {
      return connection_.runner().FailJob(context, request, &response);
    }, "FailJob");
  }

 private:
  // One call with the GIL released (a call waits on the network; Dask's
  // client threads in the same process keep running).
  template <typename Rpc>
  void Call(Rpc rpc, const std::string& what) {
    grpc::Status status;
    {
      py::gil_scoped_release release;
      std::unique_ptr<grpc::ClientContext> context = connection_.NewContext();
      status = rpc(context.get());
    }
    if (!status.ok()) {
      RaiseStatus(client::RpcError(status, absl::StrCat(what, " on ", connection_.address())));
    }
  }

  client::Connection connection_;
};

}  // namespace
}  // namespace dpcurator::python

void BindCurator(pybind11::module_& m) {
  namespace py = pybind11;
  using dpcurator::python::Curator;
  py::class_<Curator>(
      m, "Curator",
      "The curator's runner calls (RunnerService) over the CLI's connection: "
      "Curator(arguments) with the CLI's connection options as a list, e.g. ['--server', "
      "'host:port', '--tls-ca', 'ca.pem']; the token from --token or DPCURATOR_TOKEN. "
      "dpcurator.Curator(...) (the package) takes them as keywords.")
      .def(py::init<const std::vector<std::string>&>(), py::arg("arguments"))
      .def_property_readonly("address", &Curator::address)
      .def("pending_jobs", &Curator::PendingJobs, py::arg("dataset_id"),
           "The dataset's pending jobs, oldest first: dicts of job_id, dataset_id, kind, schema "
           "(bytes), request (bytes), plan_digest (bytes), created_unix.")
      .def("submit", &Curator::Submit, py::arg("job_id"), py::arg("dataset_id"),
           py::arg("partial"),
           "Submits the merged partial's exact statistic, row count and plan digest; the "
           "server noises it. Returns the release (release_id, dataset_id, kind, state).")
      .def("fail", &Curator::Fail, py::arg("job_id"), py::arg("dataset_id"), py::arg("reason"),
           "Marks the job failed. `reason` is for the curator (the server never shows it to the "
           "analyst): name the shard and line, never a cell's value.");
}
