// SPDX-License-Identifier: Apache-2.0
// The one narrow table through which the module calls verbs.
//
// The module never links libibverbs: it dlopen()s "libibverbs.so.1" (or the
// library AFMESH_IBVERBS_LIBRARY names, which is how the tests substitute
// an in-process fabric emulation) and resolves each entry with dlsym, the
// way NCCL does, so the module loads on hosts without rdma-core and reports
// NOT_PRESENT there. ibv_post_send, ibv_post_recv, ibv_poll_cq and
// ibv_req_notify_cq are static inline in verbs.h and dispatch through
// context->ops; their entries are small wrappers around those inlines.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace afmesh::ibverbs {

struct VerbsApi {
    ibv_device **(*get_device_list)(int *num_devices);
    void (*free_device_list)(ibv_device **list);
    const char *(*get_device_name)(ibv_device *device);
    ibv_context *(*open_device)(ibv_device *device);
    int (*close_device)(ibv_context *context);
    int (*query_device)(ibv_context *context, ibv_device_attr *attr);
    /** The exported (compat) entry; it fills every field up to link_layer, which is all the module reads. */
    int (*query_port)(ibv_context *context, uint8_t port, ibv_port_attr *attr);
    int (*query_gid)(ibv_context *context, uint8_t port, int index, ibv_gid *gid);
    /** Optional (rdma-core >= 32): the GID's type; sysfs is read when absent. */
    int (*query_gid_ex)(ibv_context *context, uint32_t port, uint32_t index, ibv_gid_entry *entry, uint32_t flags,
                        size_t entry_size);
    int (*get_async_event)(ibv_context *context, ibv_async_event *event);
    void (*ack_async_event)(ibv_async_event *event);

    ibv_pd *(*alloc_pd)(ibv_context *context);
    int (*dealloc_pd)(ibv_pd *pd);
    ibv_mr *(*reg_mr)(ibv_pd *pd, void *addr, size_t length, int access);
    /** Optional (rdma-core >= 34): GPUDirect through a dma-buf. */
    ibv_mr *(*reg_dmabuf_mr)(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
    int (*dereg_mr)(ibv_mr *mr);

    ibv_comp_channel *(*create_comp_channel)(ibv_context *context);
    int (*destroy_comp_channel)(ibv_comp_channel *channel);
    ibv_cq *(*create_cq)(ibv_context *context, int cqe, void *cq_context, ibv_comp_channel *channel, int vector);
    int (*resize_cq)(ibv_cq *cq, int cqe);
    int (*destroy_cq)(ibv_cq *cq);
    int (*get_cq_event)(ibv_comp_channel *channel, ibv_cq **cq, void **cq_context);
    void (*ack_cq_events)(ibv_cq *cq, unsigned int count);

    ibv_qp *(*create_qp)(ibv_pd *pd, ibv_qp_init_attr *attr);
    int (*modify_qp)(ibv_qp *qp, ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(ibv_qp *qp);

    const char *(*wc_status_str)(ibv_wc_status status);
    const char *(*event_type_str)(ibv_event_type type);

    // The inline data path, through context->ops.
    int (*post_send)(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad_wr);
    int (*post_recv)(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad_wr);
    int (*poll_cq)(ibv_cq *cq, int num_entries, ibv_wc *wc);
    int (*req_notify_cq)(ibv_cq *cq, int solicited_only);
};

/** A loaded verbs library: the table plus the dlopen handle, closed on destruction. */
class VerbsLibrary {
public:
    /**
     * Opens `path` and resolves the table. On failure returns nullptr and
     * sets `why` (dlerror()'s text, or the missing symbol).
     */
    static VerbsLibrary *open(const char *path, std::string *why);
    ~VerbsLibrary();
    VerbsLibrary(const VerbsLibrary &) = delete;
    VerbsLibrary &operator=(const VerbsLibrary &) = delete;

    const VerbsApi &api() const { return api_; }
    const std::string &path() const { return path_; }

private:
    VerbsLibrary(void *handle, std::string path) : handle_(handle), path_(std::move(path)) {}

    void *handle_;
    std::string path_;
    VerbsApi api_{};
};

/** The library loaded when AFMESH_IBVERBS_LIBRARY is empty. */
inline constexpr const char *kDefaultVerbsLibrary = "libibverbs.so.1";

}  // namespace afmesh::ibverbs
