package controller

import "k8s.io/client-go/tools/cache"

// ObjectOf is an informer event's object as a T: the object itself, or the
// last state the informer knew of one whose deletion it missed
// (cache.DeletedFinalStateUnknown). The zero T (nil for a pointer) when it
// is neither.
func ObjectOf[T any](obj any) T {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, _ := obj.(T)
	return o
}
