// gRPC metadata keys of RingNode calls, shared by the daemon and the CLI.
#ifndef RINGLM_PROTO_CALL_METADATA_H_
#define RINGLM_PROTO_CALL_METADATA_H_

namespace ringlm {

// The model a call is for: its fingerprint, or a name the daemon serves it
// under. A daemon that hosts several models hands the call to that model's
// ring (daemon/ring_server.h); without it, to its first model.
inline constexpr char kModelMetadata[] = "ringlm-model";

}  // namespace ringlm

#endif  // RINGLM_PROTO_CALL_METADATA_H_
