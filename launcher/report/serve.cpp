// DLH — the report over HTTP (see serve.hpp), on Boost.Beast: one thread, asynchronous, so
// connections are served side by side and each has its own deadlines.
#include "launcher/report/serve.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "common/error.hpp"

namespace dlh::report {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

constexpr size_t kMaxHeaderBytes = 8192;  // a browser's GET is well under it

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Equal strings in a time that does not depend on where they differ.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= (unsigned char)(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

// The value of `key` in the target's query ("/?token=abc&x=1" -> "abc"), "" when absent.
std::string QueryValue(const std::string& target, const std::string& key) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  for (size_t at = q + 1; at < target.size();) {
    size_t end = target.find('&', at);
    if (end == std::string::npos) end = target.size();
    const std::string item = target.substr(at, end - at);
    if (item.rfind(key + "=", 0) == 0) return item.substr(key.size() + 1);
    at = end + 1;
  }
  return "";
}

// The Host header's name without its port ("localhost:9000" -> "localhost", "[::1]:80" ->
// "[::1]").
std::string HostName(const std::string& host) {
  if (!host.empty() && host[0] == '[') return Lower(host.substr(0, host.find(']') + 1));
  return Lower(host.substr(0, host.find(':')));
}

struct Site {
  ServeOptions options;
  std::function<std::string()> page;
  std::vector<std::string> hosts;  // the names the Host header may give
  int open = 0;                    // connections being served
};

http::response<http::string_body> Text(http::status status, const std::string& body) {
  http::response<http::string_body> r;
  r.result(status);
  r.set(http::field::content_type, "text/plain");
  r.body() = body;
  return r;
}

http::response<http::string_body> Answer(const http::request<http::string_body>& request,
                                         const Site& site) {
  http::response<http::string_body> response;
  const std::string target(request.target());
  const std::string path = target.substr(0, target.find('?'));
  const std::string host = HostName(std::string(request[http::field::host]));
  if (std::find(site.hosts.begin(), site.hosts.end(), host) == site.hosts.end()) {
    response =
        Text(http::status::forbidden, "dlh-report: the Host header does not name this machine\n");
  } else if (!SameSecret(QueryValue(target, "token"), site.options.token)) {
    response = Text(http::status::forbidden,
                    "dlh-report: this report is private: open the URL dlh-report printed, with "
                    "its token\n");
  } else if (request.method() != http::verb::get && request.method() != http::verb::head) {
    response = Text(http::status::method_not_allowed, "dlh-report: only GET\n");
  } else if (path != "/" && path != "/index.html") {
    response = Text(http::status::not_found, "dlh-report: the report is at /\n");
  } else {
    response.result(http::status::ok);
    response.set(http::field::content_type, "text/html; charset=utf-8");
    response.set(http::field::cache_control, "no-store");  // always the run as it is now
    response.set("Referrer-Policy", "no-referrer");        // the token stays here
    try {
      response.body() = site.page();
    } catch (const std::exception& e) {  // the run folder went away: say so, keep serving
      response =
          Text(http::status::internal_server_error, std::string("dlh-report: ") + e.what() + "\n");
    }
  }
  response.version(request.version());
  response.keep_alive(false);
  response.set(http::field::server, "dlh-report");
  response.prepare_payload();
  if (request.method() == http::verb::head) response.body().clear();
  return response;
}

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// One connection: one request, one answer, each within its deadline, then closed.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Site& site) : stream_(std::move(socket)), site_(site) {
    ++site_.open;
  }
  ~Session() { --site_.open; }
  void Start() {
    parser_.header_limit(kMaxHeaderBytes);
    parser_.body_limit(kMaxHeaderBytes);
    stream_.expires_after(Seconds(site_.options.read_timeout_s));
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->Read(ec); });
  }

 private:
  void Read(beast::error_code ec) {
    if (ec) return Close();  // not HTTP, closed, too large or too slow: nothing to answer
    response_ = Answer(parser_.get(), site_);
    stream_.expires_after(Seconds(site_.options.write_timeout_s));
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) { self->Close(); });
  }
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  Site& site_;
  beast::flat_buffer buffer_;
  http::request_parser<http::string_body> parser_;
  http::response<http::string_body> response_;
};

void Accept(tcp::acceptor& acceptor, Site& site) {
  acceptor.async_accept([&acceptor, &site](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      if (site.open < site.options.max_connections) {
        std::make_shared<Session>(std::move(socket), site)->Start();
      } else {
        beast::error_code ignored;
        socket.close(ignored);  // full: this one waits for no one
      }
    }
    Accept(acceptor, site);
  });
}

}  // namespace

std::string NewServeToken() {
  std::random_device device;  // /dev/urandom on Linux
  std::string hex;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof part, "%08x", unsigned(device()));
    hex += part;
  }
  return hex;
}

void Serve(const ServeOptions& options, const std::function<std::string()>& page,
           const std::function<void(int port)>& ready) {
  if (options.token.empty()) throw Error("--serve: no token (internal)");
  net::io_context io;
  tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  const net::ip::address ip = net::ip::make_address(options.address, ec);
  if (ec) throw UsageError("--bind " + options.address + ": not an IP address");
  const tcp::endpoint endpoint(ip, static_cast<unsigned short>(options.port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw Error(options.address + ":" + std::to_string(options.port) +
                ": cannot listen: " + ec.message());
  Site site;
  site.options = options;
  site.page = page;
  site.hosts = {"localhost", "127.0.0.1", "[::1]"};
  site.hosts.push_back(Lower(ip.is_v6() ? "[" + options.address + "]" : options.address));
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0 && name[0]) site.hosts.push_back(Lower(name));
  ready(acceptor.local_endpoint().port());
  Accept(acceptor, site);
  io.run();
}

}  // namespace dlh::report
