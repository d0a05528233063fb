package slim

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// PodList is a page of Pods, as a pod informer's list returns them.
type PodList struct {
	metav1.ListMeta
	Items []*Pod
}

// GetObjectKind: a PodList carries no type metadata.
func (l *PodList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies l and its pods.
func (l *PodList) DeepCopyObject() runtime.Object {
	c := &PodList{Items: make([]*Pod, len(l.Items))}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i, p := range l.Items {
		c.Items[i] = p.DeepCopyObject().(*Pod)
	}
	return c
}

// NewListWatch lists and watches pods (of every namespace) through rc, a
// core/v1 REST client, reading the API server's protobuf straight into Pods:
// an informer over it never decodes a whole corev1.Pod. Only protobuf is
// accepted: every built-in type has that encoding, and the server refuses
// (406) rather than answer in another. It lists the old way: a streaming
// list (client-go's WatchListClient) ends with a bookmark whose annotation
// a Pod decoded here does not keep.
func NewListWatch(rc rest.Interface) ListOnly {
	return ListOnly{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			body, err := rc.Get().Resource("pods").VersionedParams(&opts, scheme.ParameterCodec).
				SetHeader("Accept", runtime.ContentTypeProtobuf).Do(ctx).Raw()
			if err != nil {
				return nil, err
			}
			return DecodePodList(body)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			stream, err := rc.Get().Resource("pods").VersionedParams(&opts, scheme.ParameterCodec).
				SetHeader("Accept", runtime.ContentTypeProtobuf).Stream(ctx)
			if err != nil {
				return nil, err
			}
			return watch.NewStreamWatcher(&watchDecoder{r: stream},
				apierrors.NewClientErrorReporter(http.StatusInternalServerError, "WATCH", "ClientWatchDecoding")), nil
		},
	}}
}

// ListOnly tells client-go's reflector not to use streaming lists.
type ListOnly struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported is what the reflector asks.
func (ListOnly) IsWatchListSemanticsUnSupported() bool { return true }

// maxFrame bounds a watch event: an object is at most a few MiB (etcd's
// request limit); a larger length means a corrupt stream.
const maxFrame = 64 << 20

// watchDecoder reads a protobuf watch stream: frames of a 4-byte big-endian
// length and a WatchEvent {1: type, 2: {1: object}}.
type watchDecoder struct {
	r   io.ReadCloser
	buf []byte
}

func (d *watchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(d.r, hdr[:]); err != nil {
		return "", nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return "", nil, fmt.Errorf("watch event of %d bytes: the stream is corrupt", n)
	}
	if cap(d.buf) < int(n) {
		d.buf = make([]byte, n)
	}
	frame := d.buf[:n]
	if _, err := io.ReadFull(d.r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", nil, err
	}
	typ, obj, err := decodeEvent(frame)
	if err != nil {
		return "", nil, fmt.Errorf("decoding a pod watch event: %w", err)
	}
	return typ, obj, nil
}

func (d *watchDecoder) Close() { _ = d.r.Close() }

// decodeEvent reads one WatchEvent; an ERROR event's Status is decoded by
// the API machinery, so a watcher sees the same error as with client-go's own
// decoder (an expired resource version makes the informer list again).
func decodeEvent(b []byte) (watch.EventType, runtime.Object, error) {
	var typ watch.EventType
	var raw []byte
	err := each(b, func(f field) error {
		switch f.num {
		case 1:
			s, err := f.str()
			typ = watch.EventType(s)
			return err
		case 2:
			ext, err := f.bytesOf()
			if err != nil {
				return err
			}
			return each(ext, func(f field) (err error) {
				if f.num == 1 {
					raw, err = f.bytesOf()
				}
				return err
			})
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		p, err := DecodePod(raw)
		return typ, p, err
	case watch.Error:
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
		return typ, obj, err
	}
	return "", nil, fmt.Errorf("unknown watch event type %q", typ)
}
