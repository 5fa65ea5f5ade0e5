// DLH SPANK plugin — the nodes' state read from slurmctld in the process (see slurm_nodes.hpp).
#include "plugin/slurm_nodes.hpp"

#include <dlfcn.h>

// Without libslurm-dev the rest of the plugin still builds (unit tests); LoadLiveNodes then
// reports that the plugin was built without Slurm's headers.
#if __has_include(<slurm/slurm.h>)
#include <slurm/slurm.h>
#define DLH_HAVE_SLURM_H 1
#endif

#include <cstdint>
#include <string>
#include <vector>

namespace dlh::plugin {

using plan::LiveNode;

#ifdef DLH_HAVE_SLURM_H
namespace {

using LoadNodeFn = int (*)(time_t, node_info_msg_t**, uint16_t);
using FreeNodeFn = void (*)(node_info_msg_t*);
using SelectInfoFn = int (*)(dynamic_plugin_data_t*, enum select_nodedata_type, enum node_states,
                             void*);
using ErrnoFn = int (*)(void);
using StrerrorFn = char* (*)(int);

// A missing symbol is an answer, not an error to keep: glibc holds a failed dlsym's message in
// thread-local storage until dlerror() has returned it once and is called again. Both calls
// release it here (LeakSanitizer runs with use_tls=0, which would report it at exit).
template <typename F>
F Symbol(const char* name) {
  void* symbol = dlsym(RTLD_DEFAULT, name);
  if (!symbol && dlerror()) dlerror();
  return reinterpret_cast<F>(symbol);
}

std::string Str(const char* s) { return s ? s : ""; }

std::string StateOf(const node_info_t& n, SelectInfoFn select_info) {
  const uint32_t s = n.node_state, base = s & NODE_STATE_BASE;
  if (s & NODE_STATE_DRAIN) return "drain";
  if (base == NODE_STATE_DOWN || base == NODE_STATE_UNKNOWN || base == NODE_STATE_FUTURE ||
      (s & (NODE_STATE_NO_RESPOND | NODE_STATE_FAIL | NODE_STATE_POWERED_DOWN |
            NODE_STATE_POWERING_DOWN | NODE_STATE_POWERING_UP | NODE_STATE_REBOOT_ISSUED |
            NODE_STATE_INVALID_REG)))
    return "down";
  if (s & (NODE_STATE_RES | NODE_STATE_MAINT)) return "reserved";
  if (base == NODE_STATE_IDLE) return "idle";
  if (base == NODE_STATE_MIXED) return "mixed";
  if (base == NODE_STATE_ALLOCATED) {
    // slurmctld reports ALLOCATED for a partly used node; sinfo derives MIXED from the
    // allocated CPU count, and so do we.
    uint16_t alloc_cpus = 0;
    if (select_info && n.select_nodeinfo &&
        select_info(n.select_nodeinfo, SELECT_NODEDATA_SUBCNT, NODE_STATE_ALLOCATED, &alloc_cpus) ==
            SLURM_SUCCESS &&
        alloc_cpus < n.cpus)
      return "mixed";
    return "alloc";
  }
  return "unknown";
}

}  // namespace

bool LoadLiveNodes(std::vector<LiveNode>* nodes, std::string* error) {
  auto load = Symbol<LoadNodeFn>("slurm_load_node");
  auto release = Symbol<FreeNodeFn>("slurm_free_node_info_msg");
  auto select_info = Symbol<SelectInfoFn>("slurm_get_select_nodeinfo");
  if (!load || !release) {
    *error = "slurm_load_node is not available in this process";
    return false;
  }
  node_info_msg_t* msg = nullptr;
  if (load(0, &msg, SHOW_ALL | SHOW_DETAIL) != SLURM_SUCCESS || !msg) {
    auto get_errno = Symbol<ErrnoFn>("slurm_get_errno");
    auto strerror = Symbol<StrerrorFn>("slurm_strerror");
    *error = "slurm_load_node: " +
             (get_errno && strerror ? Str(strerror(get_errno())) : std::string("failed"));
    return false;
  }
  nodes->clear();
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& n = msg->node_array[i];
    if (!n.name) continue;  // hidden or future nodes have no record
    nodes->push_back(
        {n.name, StateOf(n, select_info), Str(n.gres), Str(n.gres_used), Str(n.features)});
  }
  release(msg);
  return true;
}
#else
bool LoadLiveNodes(std::vector<LiveNode>* nodes, std::string* error) {
  nodes->clear();
  *error = "built without Slurm's headers";
  return false;
}
#endif

}  // namespace dlh::plugin
