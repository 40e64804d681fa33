// SPDX-License-Identifier: Apache-2.0
#include "verbs_api.h"

#include <dlfcn.h>

#include <memory>

namespace afmesh::ibverbs {
namespace {

int inline_post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad_wr) { return ibv_post_send(qp, wr, bad_wr); }
int inline_post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad_wr) { return ibv_post_recv(qp, wr, bad_wr); }
int inline_poll_cq(ibv_cq *cq, int num_entries, ibv_wc *wc) { return ibv_poll_cq(cq, num_entries, wc); }
int inline_req_notify_cq(ibv_cq *cq, int solicited_only) { return ibv_req_notify_cq(cq, solicited_only); }

// Resolves `name` into `slot`; false (with `why`) when a required symbol is missing.
template <class Fn>
bool resolve(void *handle, const char *name, Fn *slot, bool required, std::string *why) {
    *slot = reinterpret_cast<Fn>(dlsym(handle, name));
    if (*slot || !required) return true;
    *why = std::string("symbol ") + name + " is missing";
    return false;
}

}  // namespace

VerbsLibrary *VerbsLibrary::open(const char *path, std::string *why) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *error = dlerror();
        *why = error ? error : "dlopen failed";
        return nullptr;
    }
    std::unique_ptr<VerbsLibrary> library(new VerbsLibrary(handle, path));
    VerbsApi &a = library->api_;
    const bool ok =
        resolve(handle, "ibv_get_device_list", &a.get_device_list, true, why) &&
        resolve(handle, "ibv_free_device_list", &a.free_device_list, true, why) &&
        resolve(handle, "ibv_get_device_name", &a.get_device_name, true, why) &&
        resolve(handle, "ibv_open_device", &a.open_device, true, why) &&
        resolve(handle, "ibv_close_device", &a.close_device, true, why) &&
        resolve(handle, "ibv_query_device", &a.query_device, true, why) &&
        resolve(handle, "ibv_query_port", &a.query_port, true, why) &&
        resolve(handle, "ibv_query_gid", &a.query_gid, true, why) &&
        resolve(handle, "_ibv_query_gid_ex", &a.query_gid_ex, false, why) &&
        resolve(handle, "ibv_get_async_event", &a.get_async_event, true, why) &&
        resolve(handle, "ibv_ack_async_event", &a.ack_async_event, true, why) &&
        resolve(handle, "ibv_alloc_pd", &a.alloc_pd, true, why) &&
        resolve(handle, "ibv_dealloc_pd", &a.dealloc_pd, true, why) &&
        resolve(handle, "ibv_reg_mr", &a.reg_mr, true, why) &&
        resolve(handle, "ibv_reg_dmabuf_mr", &a.reg_dmabuf_mr, false, why) &&
        resolve(handle, "ibv_dereg_mr", &a.dereg_mr, true, why) &&
        resolve(handle, "ibv_create_comp_channel", &a.create_comp_channel, true, why) &&
        resolve(handle, "ibv_destroy_comp_channel", &a.destroy_comp_channel, true, why) &&
        resolve(handle, "ibv_create_cq", &a.create_cq, true, why) &&
        resolve(handle, "ibv_resize_cq", &a.resize_cq, true, why) &&
        resolve(handle, "ibv_destroy_cq", &a.destroy_cq, true, why) &&
        resolve(handle, "ibv_get_cq_event", &a.get_cq_event, true, why) &&
        resolve(handle, "ibv_ack_cq_events", &a.ack_cq_events, true, why) &&
        resolve(handle, "ibv_create_qp", &a.create_qp, true, why) &&
        resolve(handle, "ibv_modify_qp", &a.modify_qp, true, why) &&
        resolve(handle, "ibv_destroy_qp", &a.destroy_qp, true, why) &&
        resolve(handle, "ibv_wc_status_str", &a.wc_status_str, true, why) &&
        resolve(handle, "ibv_event_type_str", &a.event_type_str, true, why);
    if (!ok) return nullptr;  // the destructor closes the handle
    a.post_send = inline_post_send;
    a.post_recv = inline_post_recv;
    a.poll_cq = inline_poll_cq;
    a.req_notify_cq = inline_req_notify_cq;
    return library.release();
}

VerbsLibrary::~VerbsLibrary() { dlclose(handle_); }

}  // namespace afmesh::ibverbs
