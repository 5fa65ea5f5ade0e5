// DLH — dlh-report --serve PORT: the run's report over HTTP, rebuilt for every request, so a
// browser on a laptop follows a job on the cluster through an ssh tunnel
// (ssh -L 8080:localhost:8080 login-node, then http://localhost:8080/).
#pragma once

#include <functional>
#include <string>

namespace dlh::report {

// Listens on `address`:`port` (port 0: one the system picks) and answers GET / with
// `page()`; anything else gets 404, other methods 405. `ready(port)` is called once
// listening, with the port. Serves one request at a time until the process is stopped.
// Throws dlh::Error when it cannot listen ("127.0.0.1:8080: cannot listen: Address already
// in use").
void Serve(const std::string& address, int port, const std::function<std::string()>& page,
           const std::function<void(int port)>& ready);

}  // namespace dlh::report
