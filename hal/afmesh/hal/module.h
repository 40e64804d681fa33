/* SPDX-License-Identifier: Apache-2.0 */
/*
 * afmesh module ABI — the part shared by device and transport modules.
 *
 * A module is a shared object named libafmesh_dev_<name>.so (device) or
 * libafmesh_net_<name>.so (transport) that exports exactly one C symbol,
 * AFMESH_MODULE_QUERY_SYMBOL, of type afmesh_module_query_fn. The core
 * dlopen()s the file, calls the query with the ABI major it speaks and a table
 * of host services, and receives a descriptor with the module's kind, name,
 * version and a pointer to its kind-specific operations table
 * (afmesh_device_ops in device.h, afmesh_net_ops in transport.h).
 *
 * Versioning rules (the NCCL/Level Zero discipline):
 *  - A major version change is incompatible. A module that does not speak the
 *    host's major returns AFMESH_HAL_UNSUPPORTED_VERSION and is skipped.
 *  - A minor version only appends fields to the end of structs. Every struct
 *    that crosses the boundary begins with `struct_size`; a reader checks
 *    struct_size before touching any field added after version 1.0.
 *  - No C++ types, no exceptions and no ownership of memory cross the
 *    boundary; a module never links the core library.
 *
 * These three headers (module.h, device.h, transport.h) depend only on the C
 * standard library and may be copied into a third-party module's source tree.
 */
#ifndef AFMESH_HAL_MODULE_H
#define AFMESH_HAL_MODULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AFMESH_HAL_ABI_MAJOR 1
#define AFMESH_HAL_ABI_MINOR 5

/** The one symbol a module exports. */
#define AFMESH_MODULE_QUERY_SYMBOL "afmesh_module_query"

/** Marks the query function exported even under -fvisibility=hidden. */
#if defined(__GNUC__)
#define AFMESH_MODULE_EXPORT __attribute__((visibility("default")))
#else
#define AFMESH_MODULE_EXPORT
#endif

/**
 * Status codes returned by every module function. Zero is success, positive
 * values are expected, non-error outcomes, negative values are errors.
 * Whenever a function returns a negative status (or NOT_PRESENT), it should
 * first describe the reason with host->set_error() on the calling thread.
 */
typedef enum afmesh_hal_status {
    AFMESH_HAL_OK = 0,
    /** Nothing to report yet / resource temporarily exhausted: try again. */
    AFMESH_HAL_AGAIN = 1,
    /** init(): no driver, library or device on this host. Normal, not an error. */
    AFMESH_HAL_NOT_PRESENT = 2,
    /** Generic failure of the underlying library or system call. */
    AFMESH_HAL_ERROR = -1,
    /** The host's ABI major is not one this module implements. */
    AFMESH_HAL_UNSUPPORTED_VERSION = -2,
    /** A caller-supplied argument is invalid (null, out of range, wrong size). */
    AFMESH_HAL_INVALID_ARGUMENT = -3,
    /** Memory or another finite resource could not be obtained. */
    AFMESH_HAL_NO_MEMORY = -4,
    /** The operation (or this memory kind) is not supported by the module. */
    AFMESH_HAL_NOT_SUPPORTED = -5,
    /** The remote peer failed, closed the connection or violated the protocol. */
    AFMESH_HAL_PEER_FAILED = -6,
    /** A memory access fell outside a registered region or lacked permission. */
    AFMESH_HAL_ACCESS = -7,
    /** A bounded wait expired. */
    AFMESH_HAL_TIMEOUT = -8,
} afmesh_hal_status;

typedef enum afmesh_module_kind {
    AFMESH_MODULE_DEVICE = 1,
    AFMESH_MODULE_TRANSPORT = 2,
} afmesh_module_kind;

typedef enum afmesh_log_level {
    AFMESH_LOG_ERROR = 0,
    AFMESH_LOG_WARN = 1,
    AFMESH_LOG_INFO = 2,
    AFMESH_LOG_DEBUG = 3,
    AFMESH_LOG_TRACE = 4,
} afmesh_log_level;

/**
 * Memory kinds. The kind of every buffer is always given explicitly by the
 * caller; pointer queries only validate it. (The public afmesh.h declares
 * the same enum under the same guard, so both headers can be included.)
 */
#ifndef AFMESH_MEM_KIND_DEFINED
#define AFMESH_MEM_KIND_DEFINED
typedef enum afmesh_mem_kind {
    AFMESH_MEM_HOST = 0, /**< pageable or pinned host memory */
    AFMESH_MEM_CUDA = 1, /**< NVIDIA device memory */
    AFMESH_MEM_HIP = 2,  /**< AMD device memory */
    AFMESH_MEM_ZE = 3,   /**< Intel Level Zero device memory */
} afmesh_mem_kind;
#endif
#define AFMESH_MEM_KIND_COUNT 4

/** Bit for a memory kind in a capability mask. */
#define AFMESH_MEM_BIT(kind) (1u << (unsigned)(kind))

/**
 * Services the core offers to a module. Valid from the query call until the
 * module is unloaded. All functions are thread-safe.
 */
typedef struct afmesh_host_services {
    uint32_t struct_size;
    /** Logs a message at `level`; `module` is the module's name. printf-style. */
    void (*log)(int level, const char *module, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;
    /**
     * Records why the current call is failing, on the calling thread. The core
     * reads it after a function returns NOT_PRESENT or a negative status and
     * passes it on to the user. printf-style.
     */
    void (*set_error)(const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 1, 2)))
#endif
        ;
    /**
     * Returns the value of a configuration variable (e.g.
     * "AFMESH_FABRIC_PROVIDER"), or NULL when it is unset. The core owns the
     * string; it stays valid while the module is loaded. Modules read their
     * settings through this, never with getenv(), so that every variable is
     * listed by `afmesh info` and checked for typos: the core's own settings,
     * and (ABI 1.4) those the module declares in afmesh_module_desc.settings,
     * for which it returns the environment's value, else the declared
     * default. A value that does not fit the declared type reads as the
     * default (and the core warns about it).
     */
    const char *(*get_config)(const char *name);
} afmesh_host_services;

/** The type of a module's setting (ABI 1.4): what values the core accepts for it. */
typedef enum afmesh_setting_type {
    AFMESH_SETTING_STRING = 0, /**< any text */
    AFMESH_SETTING_INT = 1,    /**< a decimal integer within [min, max] */
    AFMESH_SETTING_BOOL = 2,   /**< "0" or "1" */
    AFMESH_SETTING_ENUM = 3,   /**< one of `choices` */
} afmesh_setting_type;

/**
 * One AFMESH_* variable a module reads besides the core's own (ABI 1.4). A
 * module lists them in an array in static storage and hands it over with
 * afmesh_module_describe_settings(); the core copies what it needs, lists
 * them in `afmesh info`, checks the environment's values against `type` and
 * suggests them for misspelt names, and get_config() returns their default.
 * Its layout is frozen (no struct_size): a later minor that needs more adds
 * another table.
 *
 * A module declares only its own settings: one of the core's (such as
 * AFMESH_NET_DEVICES or AFMESH_SYSFS_ROOT) it reads without declaring it. A
 * name several modules declare must be declared alike by each. The core
 * refuses to load a module whose table breaks these rules.
 */
typedef struct afmesh_module_setting {
    const char *name;          /**< "AFMESH_" followed by upper-case letters, digits and '_' */
    uint32_t type;             /**< afmesh_setting_type */
    const char *default_value; /**< as the environment would spell it; NULL (or "") when unset by default */
    const char *choices;       /**< ENUM: the allowed values, '|'-separated ("auto|shared"); otherwise NULL */
    int64_t min, max;          /**< INT: inclusive bounds; otherwise ignored */
    const char *doc;           /**< one line for `afmesh info` */
} afmesh_module_setting;

/** What a module's query fills in. */
typedef struct afmesh_module_desc {
    uint32_t struct_size;  /**< set by the core to sizeof its struct; the module must not write past it */
    uint16_t abi_major;    /**< the module's ABI major (== AFMESH_HAL_ABI_MAJOR it was built with) */
    uint16_t abi_minor;
    uint32_t kind;         /**< afmesh_module_kind */
    const char *name;      /**< short name, e.g. "tcp", "cuda"; must match the file name */
    const char *version;   /**< free-form version of the module and what it wraps */
    const void *ops;       /**< afmesh_device_ops* or afmesh_net_ops*, static storage */
    /* ABI 1.4. Written only where struct_size covers them; the core reads them
     * only from a module that answered with abi_minor >= 4. */
    const afmesh_module_setting *settings; /**< the module's own settings, static storage; NULL when none */
    uint32_t setting_count;                /**< entries in `settings` */
} afmesh_module_desc;

/** sizeof(afmesh_module_desc) at ABI 1.0 to 1.3: the least a module accepts from the core. */
#define AFMESH_MODULE_DESC_SIZE_1_0 (offsetof(afmesh_module_desc, ops) + sizeof(const void *))
/** The struct_size from which the settings fields (ABI 1.4) are there to write. */
#define AFMESH_MODULE_DESC_SIZE_1_4 (offsetof(afmesh_module_desc, setting_count) + sizeof(uint32_t))

/**
 * The exported entry point.
 * @param host_abi_major AFMESH_HAL_ABI_MAJOR of the core.
 * @param host services the module may keep a pointer to.
 * @param out descriptor to fill in (out->struct_size is set by the caller).
 * @return AFMESH_HAL_OK, or AFMESH_HAL_UNSUPPORTED_VERSION on a major mismatch.
 * Must be cheap and must not touch any device: probing happens in init().
 */
typedef int (*afmesh_module_query_fn)(uint32_t host_abi_major,
                                      const afmesh_host_services *host,
                                      afmesh_module_desc *out);

/**
 * Helper for a module's query function: fills `out` with the ABI this header
 * describes and checks the host's major. Typical use:
 *
 *   AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t major,
 *           const afmesh_host_services *host, afmesh_module_desc *out) {
 *       g_host = host;
 *       return afmesh_module_describe(major, out, AFMESH_MODULE_DEVICE,
 *                                     "mydev", "mydev 1.2", &my_ops);
 *   }
 */
static inline int afmesh_module_describe(uint32_t host_abi_major, afmesh_module_desc *out, uint32_t kind,
                                         const char *name, const char *version, const void *ops) {
    out->abi_major = AFMESH_HAL_ABI_MAJOR;
    out->abi_minor = AFMESH_HAL_ABI_MINOR;
    if (host_abi_major != AFMESH_HAL_ABI_MAJOR) return AFMESH_HAL_UNSUPPORTED_VERSION;
    out->kind = kind;
    out->name = name;
    out->version = version;
    out->ops = ops;
    return AFMESH_HAL_OK;
}

/**
 * afmesh_module_describe() for a module that reads settings of its own:
 * also hands over its table (ABI 1.4), where the host's descriptor has room
 * for it (a host older than 1.4 has none and never reads it). Typical use:
 *
 *   static const afmesh_module_setting kSettings[] = {
 *       {"AFMESH_MYDEV_QUEUES", AFMESH_SETTING_INT, "4", NULL, 1, 64,
 *        "queues the mydev device module opens per device"},
 *   };
 *   ...
 *       return afmesh_module_describe_settings(major, out, AFMESH_MODULE_DEVICE,
 *               "mydev", "mydev 1.2", &my_ops, kSettings,
 *               sizeof kSettings / sizeof kSettings[0]);
 */
static inline int afmesh_module_describe_settings(uint32_t host_abi_major, afmesh_module_desc *out, uint32_t kind,
                                                  const char *name, const char *version, const void *ops,
                                                  const afmesh_module_setting *settings, uint32_t setting_count) {
    int rc = afmesh_module_describe(host_abi_major, out, kind, name, version, ops);
    if (rc == AFMESH_HAL_OK && out->struct_size >= AFMESH_MODULE_DESC_SIZE_1_4) {
        out->settings = settings;
        out->setting_count = setting_count;
    }
    return rc;
}

#ifdef __cplusplus
}
#endif

#endif /* AFMESH_HAL_MODULE_H */
