// DLH — dlh-report --serve PORT: the run's report over HTTP, rebuilt for every request, so a
// browser on a laptop follows a job on the cluster through an ssh tunnel
// (ssh -L 8080:localhost:8080 login-node, then the URL dlh-report printed).
//
// Private by default (issue 41). Every local user can reach 127.0.0.1, so every request must
// carry the random token of the URL dlh-report prints (?token=..., as Jupyter does: 128 bits,
// never in argv, compared in constant time); without it the answer is 403 and no byte of the
// report. The Host header must name this machine (localhost, 127.0.0.1, [::1], the bind
// address or the host name, any port: the tunnel's local port may differ), which defeats DNS
// rebinding through the tunnel. Connections are served side by side, each with a deadline
// for its request and for its answer, so an idle or slow client holds only its own
// connection; past kMaxConnections a new one is closed at once.
#pragma once

#include <functional>
#include <string>

namespace dlh::report {

struct ServeOptions {
  std::string address = "127.0.0.1";
  int port = 0;                // 0: one the system picks
  std::string token;           // required in every request (?token=TOKEN); must not be empty
  double read_timeout_s = 10;  // a request must arrive whole within this
  double write_timeout_s = 30;
  int max_connections = 32;
};

// 128 random bits (the system's random device), as 32 hex digits.
std::string NewServeToken();

// Listens and answers GET / (and /index.html, with any query) with `page()`; anything else
// gets 404, other methods 405, a missing or wrong token or a foreign Host 403. `ready(port)`
// is called once listening. Serves until the process is stopped. Throws UsageError for an
// address that is not one and dlh::Error when it cannot listen ("127.0.0.1:8080: cannot
// listen: Address already in use").
void Serve(const ServeOptions& options, const std::function<std::string()>& page,
           const std::function<void(int port)>& ready);

}  // namespace dlh::report
