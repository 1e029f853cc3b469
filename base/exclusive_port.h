// Listening sockets that refuse a port another server holds.
#ifndef RINGLM_BASE_EXCLUSIVE_PORT_H_
#define RINGLM_BASE_EXCLUSIVE_PORT_H_

#include <sys/socket.h>

namespace ringlm {

// httplib (0.11) binds its listening socket with SO_REUSEPORT, so a second
// server on a port already taken would bind as well, and the kernel would
// split the connections between the two. Call before binding: the socket
// gets SO_REUSEADDR only, and a taken port is an error.
template <typename HttplibServer>
void BindExclusively(HttplibServer& server) {
  server.set_socket_options([](auto sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

}  // namespace ringlm

#endif  // RINGLM_BASE_EXCLUSIVE_PORT_H_
