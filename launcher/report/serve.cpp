// DLH — the report over HTTP (see serve.hpp), on Boost.Beast: synchronous, one connection
// at a time, which is all an ssh tunnel to one researcher's browser needs.
#include "launcher/report/serve.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/error.hpp"

namespace dlh::report {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

http::response<http::string_body> Answer(const http::request<http::string_body>& request,
                                         const std::function<std::string()>& page) {
  http::response<http::string_body> response;
  response.version(request.version());
  response.keep_alive(false);
  response.set(http::field::server, "dlh-report");
  const std::string target(request.target());
  if (request.method() != http::verb::get && request.method() != http::verb::head) {
    response.result(http::status::method_not_allowed);
    response.set(http::field::content_type, "text/plain");
    response.body() = "dlh-report: only GET\n";
  } else if (target != "/" && target.rfind("/?", 0) != 0 && target != "/index.html") {
    response.result(http::status::not_found);
    response.set(http::field::content_type, "text/plain");
    response.body() = "dlh-report: the report is at /\n";
  } else {
    response.result(http::status::ok);
    response.set(http::field::content_type, "text/html; charset=utf-8");
    response.set(http::field::cache_control, "no-store");  // always the run as it is now
    response.body() = page();
  }
  response.prepare_payload();
  if (request.method() == http::verb::head) response.body().clear();
  return response;
}

}  // namespace

void Serve(const std::string& address, int port, const std::function<std::string()>& page,
           const std::function<void(int port)>& ready) {
  net::io_context io;
  tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  const net::ip::address ip = net::ip::make_address(address, ec);
  if (ec) throw UsageError("--bind " + address + ": not an IP address");
  const tcp::endpoint endpoint(ip, static_cast<unsigned short>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw Error(address + ":" + std::to_string(port) + ": cannot listen: " + ec.message());
  ready(acceptor.local_endpoint().port());
  for (;;) {
    tcp::socket socket(io);
    acceptor.accept(socket, ec);
    if (ec) continue;  // a client gone before it was accepted
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::read(socket, buffer, request, ec);
    if (ec) continue;  // not HTTP, or closed: nothing to answer
    http::response<http::string_body> response;
    try {
      response = Answer(request, page);
    } catch (const std::exception& e) {  // the run folder went away: say so, keep serving
      response.result(http::status::internal_server_error);
      response.set(http::field::content_type, "text/plain");
      response.body() = std::string("dlh-report: ") + e.what() + "\n";
      response.prepare_payload();
    }
    http::write(socket, response, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }
}

}  // namespace dlh::report
