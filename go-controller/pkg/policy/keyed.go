package policy

import "sync"

// State the policy workers share by key: the pod → port index and the
// locks of address set names.

// portIndex maps a pod's namespace/name to its port's UUID. A plain map
// under a lock holds each entry in its slots; a sync.Map boxed every key
// and value into objects of their own (0.39 M more objects for the
// collector to mark at 150,000 pods, make bench-scale).
type portIndex struct {
	mu sync.RWMutex
	m  map[string]string
}

func (x *portIndex) load(pod string) (string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	uuid, ok := x.m[pod]
	return uuid, ok
}

func (x *portIndex) store(pod, uuid string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]string{}
	}
	x.m[pod] = uuid
}

// forget drops a pod's entry if it still names this port (a port deleted
// after its pod's new one was stored leaves the new one).
func (x *portIndex) forget(pod, uuid string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m[pod] == uuid {
		delete(x.m, pod)
	}
}

// nameLocks hold a mutex per name while a caller holds it or waits for
// it: an entry goes with its last user, so names that come and go (the
// sets of policies long deleted) leave nothing behind, and names never
// share a mutex (a set's creation waits for no other set's).
type nameLocks struct {
	mu sync.Mutex
	m  map[string]*nameLock
}

type nameLock struct {
	sync.Mutex
	users int // holders and waiters (nameLocks.mu held)
}

// lock takes name's mutex and returns its unlock.
func (l *nameLocks) lock(name string) func() {
	e := l.entry(name)
	e.Lock()
	return l.release(name, e, true)
}

// tryLockAll takes the mutexes of all names when all are free and returns
// their unlock, or takes none and returns nil. It never waits, so a caller
// holding its result can never be part of a cycle of waiters.
func (l *nameLocks) tryLockAll(names []string) (unlock func()) {
	var unlocks []func()
	unlock = func() {
		for _, u := range unlocks {
			u()
		}
	}
	for _, name := range names {
		e := l.entry(name)
		if !e.TryLock() {
			l.release(name, e, false)()
			unlock()
			return nil
		}
		unlocks = append(unlocks, l.release(name, e, true))
	}
	return unlock
}

// entry returns name's lock counting the caller as a user.
func (l *nameLocks) entry(name string) *nameLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*nameLock{}
	}
	e := l.m[name]
	if e == nil {
		e = &nameLock{}
		l.m[name] = e
	}
	e.users++
	return e
}

// release returns the function that unlocks name's lock e when the caller
// holds it and drops the caller as its user.
func (l *nameLocks) release(name string, e *nameLock, held bool) func() {
	return func() {
		if held {
			e.Unlock()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if e.users--; e.users == 0 {
			delete(l.m, name)
		}
	}
}

// held counts the names with a holder or a waiter.
func (l *nameLocks) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
