// SPDX-License-Identifier: Apache-2.0
// Locking rules the compiler checks: clang's thread-safety annotations
// (built with -Wthread-safety in clang builds, cmake/AfmeshOptions.cmake),
// and the mutex and scoped lock they are written against.
//
// Where this lives: the core and the modules use it, and a module must not
// include core headers nor the core a module's, so it is in neither tree.
// hal/ is shared too, but hal/ is the installed SDK for module authors and
// these are build-internal helpers, not a promise to them. So common/ is
// its own include directory, added to afmesh_core (core/CMakeLists.txt) and
// to every module (cmake/AfmeshModule.cmake), and never installed.
//
// Under other compilers the macros expand to nothing and afmesh::Mutex is a
// plain std::mutex with the same code around it.
//
// Writing the rules down:
//   Mutex mu_;
//   int count_ AFMESH_GUARDED_BY(mu_) = 0;      // read or written only with mu_ held
//   void bump_locked() AFMESH_REQUIRES(mu_);    // the caller holds mu_
//   void bump() AFMESH_EXCLUDES(mu_) { MutexLock lock(&mu_); bump_locked(); }
// A condition variable wait goes through the lock (MutexLock::wait_until,
// wait_for), and its predicate, which runs with the mutex held, says so:
//   lock.wait_for(cv_, timeout, [&]() AFMESH_REQUIRES(mu_) { return count_ > 0; });
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#if defined(__clang__)
#define AFMESH_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define AFMESH_THREAD_ANNOTATION(x)
#endif

/** A type whose objects are capabilities (a mutex). */
#define AFMESH_CAPABILITY(name) AFMESH_THREAD_ANNOTATION(capability(name))
/** An RAII type that holds a capability for its lifetime (MutexLock). */
#define AFMESH_SCOPED_CAPABILITY AFMESH_THREAD_ANNOTATION(scoped_lockable)
/** A member read or written only with `x` held. */
#define AFMESH_GUARDED_BY(x) AFMESH_THREAD_ANNOTATION(guarded_by(x))
/** A pointer member whose pointee is read or written only with `x` held (the pointer itself is not). */
#define AFMESH_PT_GUARDED_BY(x) AFMESH_THREAD_ANNOTATION(pt_guarded_by(x))
/** A function called with these held (the `_locked` suffix, checked). */
#define AFMESH_REQUIRES(...) AFMESH_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
/** A function called without these held: it takes them itself. */
#define AFMESH_EXCLUDES(...) AFMESH_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define AFMESH_ACQUIRE(...) AFMESH_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define AFMESH_RELEASE(...) AFMESH_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
/** (result[, capabilities...]): acquires them when the function returns `result`. */
#define AFMESH_TRY_ACQUIRE(...) AFMESH_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
/** After the call the analysis takes `x` as held: for a lock it knows under another name only. */
#define AFMESH_ASSERT_CAPABILITY(x) AFMESH_THREAD_ANNOTATION(assert_capability(x))
/** The function returns (a reference to) capability `x`: the analysis follows the alias. */
#define AFMESH_RETURN_CAPABILITY(x) AFMESH_THREAD_ANNOTATION(lock_returned(x))

namespace afmesh {

/** std::mutex as a capability the analysis knows. */
class AFMESH_CAPABILITY("mutex") Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex &) = delete;
    Mutex &operator=(const Mutex &) = delete;

    void lock() AFMESH_ACQUIRE() { mu_.lock(); }
    void unlock() AFMESH_RELEASE() { mu_.unlock(); }
    bool try_lock() AFMESH_TRY_ACQUIRE(true) { return mu_.try_lock(); }

private:
    friend class MutexLock;  // waits on a std::condition_variable with mu_
    std::mutex mu_;
};

/**
 * Holds a Mutex from construction to destruction, like std::lock_guard;
 * unlock() and lock() in between, like std::unique_lock, are followed by
 * the analysis too.
 */
class AFMESH_SCOPED_CAPABILITY MutexLock {
public:
    explicit MutexLock(Mutex *mu) AFMESH_ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
    /** Takes over `mu`, already held (after a successful try_lock()). */
    MutexLock(Mutex *mu, std::adopt_lock_t) AFMESH_REQUIRES(mu) : mu_(mu) {}
    ~MutexLock() AFMESH_RELEASE() {
        if (held_) mu_->unlock();
    }
    MutexLock(const MutexLock &) = delete;
    MutexLock &operator=(const MutexLock &) = delete;

    void lock() AFMESH_ACQUIRE() {
        mu_->lock();
        held_ = true;
    }
    void unlock() AFMESH_RELEASE() {
        mu_->unlock();
        held_ = false;
    }

    /**
     * std::condition_variable::wait_until with the held mutex: released
     * while asleep, held again on return (and while `ready` runs), so to the
     * analysis it stays held throughout.
     */
    template <class Clock, class Duration, class Predicate>
    bool wait_until(std::condition_variable &cv, const std::chrono::time_point<Clock, Duration> &deadline,
                    Predicate &&ready) {
        return wait_native([&](std::unique_lock<std::mutex> &native) {
            return cv.wait_until(native, deadline, std::forward<Predicate>(ready));
        });
    }
    template <class Rep, class Period, class Predicate>
    bool wait_for(std::condition_variable &cv, const std::chrono::duration<Rep, Period> &timeout, Predicate &&ready) {
        return wait_native([&](std::unique_lock<std::mutex> &native) {
            return cv.wait_for(native, timeout, std::forward<Predicate>(ready));
        });
    }

private:
    /** Lends the held std::mutex to `wait` as the std::unique_lock a std::condition_variable needs. */
    template <class Wait>
    bool wait_native(Wait &&wait) {
        std::unique_lock<std::mutex> native(mu_->mu_, std::adopt_lock);
        // Handed back still locked however the wait ends (an exception from
        // the predicate too): it is this lock's to release, not native's.
        struct Keep {
            std::unique_lock<std::mutex> &native;
            ~Keep() { native.release(); }
        } keep{native};
        return wait(native);
    }

    Mutex *const mu_;
    bool held_ = true;
};

}  // namespace afmesh
