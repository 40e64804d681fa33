// SPDX-License-Identifier: Apache-2.0
//! The AF exchange from Rust with only the standard library: the C API is
//! declared here with `extern "C"`, mirroring include/afmesh/afmesh.h, and
//! linked against libafmesh.so. Run one process per node under `afmesh run`:
//!
//!   afmesh run --workers 2 --servers 2 -- af_echo_rust
//!
//! Each worker pushes a [ROWS, COLS] float32 activation per micro-batch to
//! every server and pulls one answer from each; each server answers
//! y = 2x + (its rank + 1); workers check every element.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::process::ExitCode;
use std::ptr;

const ROWS: usize = 16;
const COLS: usize = 256;
const ELEMS: usize = ROWS * COLS;
const MICROBATCHES: usize = 3;
const LAYERS: usize = 8;
const TIMEOUT_MS: c_int = 60000;

// ---- the C API (afmesh.h), only what this program uses ----

type Status = c_int;
const AFMESH_OK: Status = 0;
const ROLE_FROM_CONFIG: c_int = 0;
const ROLE_WORKER: c_int = 1;
const MEM_HOST: c_int = 0;
const BATCH_ALL_WORKERS: c_int = 0;
const MAX_DIMS: usize = 16;

#[repr(C)]
#[derive(Clone, Copy)]
struct DType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Tensor {
    data: *mut c_void,
    bytes: u64,
    kind: c_int,
    device: i32,
    dtype: DType,
    ndim: u32,
    shape: [i64; MAX_DIMS],
}

#[repr(C)]
struct Config {
    struct_size: usize,
    role: c_int,
    scheduler: *const c_char,
    settings: *const *const c_char,
}

#[repr(C)]
struct Push {
    key: u64,
    tensor: Tensor,
    servers: *const i32,
    num_servers: u32,
}

#[repr(C)]
struct Pull {
    key: u64,
    tensor: Tensor,
    server: i32,
}

#[repr(C)]
struct Node {
    _opaque: [u8; 0],
}

#[repr(C)]
struct Request {
    _opaque: [u8; 0],
}

#[link(name = "afmesh")]
extern "C" {
    fn afmesh_strerror(status: Status) -> *const c_char;
    fn afmesh_last_error() -> *const c_char;
    fn afmesh_node_create(config: *const Config, node: *mut *mut Node) -> Status;
    fn afmesh_node_destroy(node: *mut Node) -> Status;
    fn afmesh_node_info(node: *const Node, role: *mut c_int, rank: *mut i32, workers: *mut i32, servers: *mut i32)
        -> Status;
    fn afmesh_push_pull(node: *mut Node, push: *const Push, num_push: usize, pull: *const Pull, num_pull: usize,
                        handle: *mut u64) -> Status;
    fn afmesh_wait(node: *mut Node, handle: u64, timeout_ms: c_int) -> Status;
    fn afmesh_get_batch(node: *mut Node, mode: c_int, timeout_ms: c_int, requests: *mut *mut Request,
                        capacity: usize, count: *mut usize) -> Status;
    fn afmesh_request_push(request: *const Request, index: usize, key: *mut u64, tensor: *mut Tensor) -> Status;
    fn afmesh_respond(node: *mut Node, request: *mut Request, tensors: *const Tensor, count: usize) -> Status;
}

// ---- a thin safe layer ----

/// A failed call: what was being done, the status name and the library's message.
fn check(status: Status, what: &str) -> Result<(), String> {
    if status == AFMESH_OK {
        return Ok(());
    }
    // SAFETY: both return NUL-terminated strings owned by the library.
    let (name, message) = unsafe {
        (CStr::from_ptr(afmesh_strerror(status)).to_string_lossy(), CStr::from_ptr(afmesh_last_error()).to_string_lossy())
    };
    Err(format!("{what}: {name}: {message}"))
}

fn matrix(data: *mut f32) -> Tensor {
    let mut shape = [0i64; MAX_DIMS];
    shape[0] = ROWS as i64;
    shape[1] = COLS as i64;
    Tensor {
        data: data.cast(),
        bytes: (ELEMS * std::mem::size_of::<f32>()) as u64,
        kind: MEM_HOST,
        device: 0,
        dtype: DType { code: 2, bits: 32, lanes: 1 }, // DLPack float32
        ndim: 2,
        shape,
    }
}

fn pushed(worker: i32, layer: usize, mb: usize, i: usize) -> f32 {
    (worker as usize * 100 + layer * 10 + mb) as f32 + i as f32
}

fn answered(x: f32, server: usize) -> f32 {
    2.0 * x + (server + 1) as f32
}

fn run_worker(node: *mut Node, rank: i32, servers: usize) -> Result<(), String> {
    let mut push = vec![vec![0f32; ELEMS]; MICROBATCHES];
    let mut pull = vec![vec![0f32; ELEMS]; MICROBATCHES * servers];
    for layer in 0..LAYERS {
        let mut handles = [0u64; MICROBATCHES];
        for mb in 0..MICROBATCHES {
            for (i, x) in push[mb].iter_mut().enumerate() {
                *x = pushed(rank, layer, mb, i);
            }
            let p = Push { key: mb as u64, tensor: matrix(push[mb].as_mut_ptr()), servers: ptr::null(), num_servers: 0 };
            let q: Vec<Pull> = (0..servers)
                .map(|s| Pull { key: 100 + mb as u64, tensor: matrix(pull[mb * servers + s].as_mut_ptr()), server: s as i32 })
                .collect();
            // SAFETY: the buffers outlive the push-pull: they are only touched again after wait.
            check(unsafe { afmesh_push_pull(node, &p, 1, q.as_ptr(), q.len(), &mut handles[mb]) }, "push_pull")?;
        }
        for mb in 0..MICROBATCHES {
            check(unsafe { afmesh_wait(node, handles[mb], TIMEOUT_MS) }, "wait")?;
            for s in 0..servers {
                for (i, &y) in pull[mb * servers + s].iter().enumerate() {
                    if y != answered(pushed(rank, layer, mb, i), s) {
                        return Err(format!("worker {rank}: layer {layer} micro-batch {mb} server {s} element {i} is wrong"));
                    }
                }
            }
        }
    }
    println!("worker {rank}: {LAYERS} layers x {MICROBATCHES} micro-batches verified from {servers} servers");
    Ok(())
}

fn run_server(node: *mut Node, rank: i32, workers: usize) -> Result<(), String> {
    let mut out = vec![0f32; ELEMS];
    let mut batch: Vec<*mut Request> = vec![ptr::null_mut(); workers];
    for _ in 0..LAYERS * MICROBATCHES {
        let mut count = 0usize;
        check(unsafe { afmesh_get_batch(node, BATCH_ALL_WORKERS, TIMEOUT_MS, batch.as_mut_ptr(), workers, &mut count) },
              "get_batch")?;
        for &request in &batch[..count] {
            let mut key = 0u64;
            let mut input = matrix(ptr::null_mut());
            check(unsafe { afmesh_request_push(request, 0, &mut key, &mut input) }, "request_push")?;
            // SAFETY: the push view holds ELEMS floats (the worker sent a [ROWS, COLS] float32 tensor)
            // and stays valid until this request is answered.
            let x = unsafe { std::slice::from_raw_parts(input.data as *const f32, ELEMS) };
            for (y, &v) in out.iter_mut().zip(x) {
                *y = answered(v, rank as usize);
            }
            let answer = matrix(out.as_mut_ptr());
            check(unsafe { afmesh_respond(node, request, &answer, 1) }, "respond")?;
        }
    }
    println!("server {rank}: answered {} rounds", LAYERS * MICROBATCHES);
    Ok(())
}

fn main() -> ExitCode {
    let config = Config {
        struct_size: std::mem::size_of::<Config>(),
        role: ROLE_FROM_CONFIG,
        scheduler: ptr::null(),
        settings: ptr::null(),
    };
    let mut node: *mut Node = ptr::null_mut();
    let result = check(unsafe { afmesh_node_create(&config, &mut node) }, "join the cluster").and_then(|()| {
        let (mut role, mut rank, mut workers, mut servers) = (0, 0, 0, 0);
        check(unsafe { afmesh_node_info(node, &mut role, &mut rank, &mut workers, &mut servers) }, "node info")?;
        let run = if role == ROLE_WORKER {
            run_worker(node, rank, servers as usize)
        } else {
            run_server(node, rank, workers as usize)
        };
        let left = check(unsafe { afmesh_node_destroy(node) }, "leave the cluster");
        run.and(left)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("{why}");
            ExitCode::FAILURE
        }
    }
}
