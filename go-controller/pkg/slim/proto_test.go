package slim

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
)

// The API server's own encoding: the protobuf serializer with magic and
// envelope, for core/v1.
var apiEncoder = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)

func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	b, err := runtime.Encode(apiEncoder, obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// samplePods cover every field Pod keeps, and around them fields it skips.
func samplePods() []*corev1.Pod {
	rich := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web", UID: "uid-1", ResourceVersion: "7", GenerateName: "web-",
			Labels:          map[string]string{"app": "web", "role": "client", "empty": ""},
			Annotations:     map[string]string{annotations.PodNetworks: `{"default":{"ip_addresses":["10.0.0.5/24"]}}`, "other": "x"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: "Update", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}},
			OwnerReferences: []metav1.OwnerReference{{Name: "rs", Kind: "ReplicaSet", APIVersion: "apps/v1", UID: "rs-uid"}},
			Finalizers:      []string{"x/y"},
		},
		Spec: corev1.PodSpec{
			NodeName:       "n1",
			InitContainers: []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{Name: "init-port", ContainerPort: 1}}}},
			Containers: []corev1.Container{
				{Name: "a", Image: "busybox", Command: []string{"sleep"}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
					Ports: []corev1.ContainerPort{{ContainerPort: 80}, {Name: "http", ContainerPort: 8080, HostPort: 80, HostIP: "1.2.3.4"}}},
				{Name: "b", Ports: []corev1.ContainerPort{{Name: "dns", Protocol: corev1.ProtocolUDP, ContainerPort: 53}, {Name: "sctp", Protocol: corev1.ProtocolSCTP, ContainerPort: 2905}}},
			},
			NodeSelector: map[string]string{"k": "v"},
			Tolerations:  []corev1.Toleration{{Key: "t", Operator: corev1.TolerationOpExists}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	hostNet := rich.DeepCopy()
	hostNet.Spec.HostNetwork = true
	hostNet.Status.Phase = corev1.PodSucceeded
	emptyAnnotation := rich.DeepCopy()
	emptyAnnotation.Annotations = map[string]string{annotations.PodNetworks: ""}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bare"}}
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "99",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	return []*corev1.Pod{rich, hostNet, emptyAnnotation, bare, bookmark}
}

// The API machinery's decoding of b, through FromPod: what Pod must equal.
func wantFrom(t testing.TB, b []byte) *Pod {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return FromPod(obj.(*corev1.Pod))
}

func TestDecodeMatchesFromPod(t *testing.T) {
	for _, pod := range samplePods() {
		b := encode(t, pod)
		got, err := DecodePod(b)
		if err != nil {
			t.Fatalf("%s: %v", pod.Name, err)
		}
		if want := wantFrom(t, b); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", pod.Name, got, want)
		}
	}
	// Spot checks that the comparison is not between two empty pods.
	got, _ := DecodePod(encode(t, samplePods()[0]))
	if got.Name != "web" || got.UID != "uid-1" || got.NodeName != "n1" || got.Labels["role"] != "client" ||
		!got.Annotated || len(got.NamedPorts) != 3 || got.Phase != corev1.PodRunning {
		t.Errorf("rich pod decoded as %+v", got)
	}
}

func TestDecodePodList(t *testing.T) {
	remaining := int64(3)
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "token", RemainingItemCount: &remaining}}
	for _, p := range samplePods() {
		list.Items = append(list.Items, *p)
	}
	got, err := DecodePodList(encode(t, list))
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "42" || got.Continue != "token" || got.RemainingItemCount == nil || *got.RemainingItemCount != 3 {
		t.Errorf("list meta %+v", got.ListMeta)
	}
	if len(got.Items) != len(list.Items) {
		t.Fatalf("%d items, want %d", len(got.Items), len(list.Items))
	}
	for i := range list.Items {
		if want := FromPod(&list.Items[i]); !reflect.DeepEqual(got.Items[i], want) {
			t.Errorf("item %d:\ngot  %+v\nwant %+v", i, got.Items[i], want)
		}
	}
	c := got.DeepCopyObject().(*PodList)
	c.Items[0].Labels["app"] = "changed"
	if got.Items[0].Labels["app"] != "web" {
		t.Error("a copy shares its pods' labels")
	}
	empty, err := DecodePodList(encode(t, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}))
	if err != nil || len(empty.Items) != 0 || empty.ResourceVersion != "1" {
		t.Errorf("empty list: %+v %v", empty, err)
	}
}

func TestDecodeRejectsWhatIsNotAPod(t *testing.T) {
	pod := encode(t, samplePods()[0])
	json, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), samplePods()[0])
	if err != nil {
		t.Fatal(err)
	}
	node := encode(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	for name, b := range map[string][]byte{
		"JSON":      json,
		"a Node":    node,
		"truncated": pod[:len(pod)-5],
		"empty":     nil,
	} {
		if p, err := DecodePod(b); err == nil {
			t.Errorf("%s decoded as %+v", name, p)
		}
	}
	if _, err := DecodePodList(pod); err == nil {
		t.Error("a Pod decoded as a PodList")
	}
}

// watchStream is a pod watch as the API server sends it: length-delimited
// WatchEvents, each object in its envelope.
func watchStream(t *testing.T, events ...watch.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	enc := restwatch.NewEncoder(
		streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&buf), info.StreamSerializer.Serializer),
		apiEncoder)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestWatchDecoder(t *testing.T) {
	pods := samplePods()
	gone := &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	stream := watchStream(t,
		watch.Event{Type: watch.Added, Object: pods[0]},
		watch.Event{Type: watch.Modified, Object: pods[1]},
		watch.Event{Type: watch.Bookmark, Object: pods[4]},
		watch.Event{Type: watch.Deleted, Object: pods[3]},
		watch.Event{Type: watch.Error, Object: gone},
	)
	d := &watchDecoder{r: io.NopCloser(bytes.NewReader(stream))}
	for i, want := range []watch.EventType{watch.Added, watch.Modified, watch.Bookmark, watch.Deleted} {
		typ, obj, err := d.Decode()
		if err != nil || typ != want {
			t.Fatalf("event %d: %s %v, want %s", i, typ, err, want)
		}
		wantPod := FromPod(map[int]*corev1.Pod{0: pods[0], 1: pods[1], 2: pods[4], 3: pods[3]}[i])
		if !reflect.DeepEqual(obj, wantPod) {
			t.Errorf("event %d: got %+v\nwant %+v", i, obj, wantPod)
		}
	}
	typ, obj, err := d.Decode()
	if err != nil || typ != watch.Error {
		t.Fatalf("ERROR event: %s %v", typ, err)
	}
	// The informer lists again on this error: it must come through as it would
	// through client-go's decoder.
	if statusErr := apierrors.FromObject(obj); !apierrors.IsResourceExpired(statusErr) && !apierrors.IsGone(statusErr) {
		t.Errorf("ERROR event's object %#v is not an expired resource version", obj)
	}
	if _, _, err := d.Decode(); err != io.EOF {
		t.Errorf("end of stream: %v, want EOF", err)
	}

	// A stream cut inside an event is an unexpected EOF, not a clean end.
	cut := &watchDecoder{r: io.NopCloser(bytes.NewReader(stream[:len(stream)/3]))}
	for {
		if _, _, err = cut.Decode(); err != nil {
			break
		}
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut stream: %v, want unexpected EOF", err)
	}
	// A corrupt length is refused before anything is allocated for it.
	huge := &watchDecoder{r: io.NopCloser(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}))}
	if _, _, err := huge.Decode(); err == nil {
		t.Error("a 4 GiB frame was accepted")
	}
}

// FuzzDecodePod: any pod the API machinery decodes, encoded again as an API
// server would, DecodePod reads as FromPod keeps it; where both read the
// fuzzer's bytes as they are, they agree; nothing makes DecodePod panic.
func FuzzDecodePod(f *testing.F) {
	for _, p := range samplePods() {
		b, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := &Pod{}
		err := decodePod(b, got)
		var pod corev1.Pod
		if pod.Unmarshal(b) != nil {
			return
		}
		want := FromPod(&pod)
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("as sent: got  %+v\nwant %+v", got, want)
		}
		canonical, err := pod.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got = &Pod{}
		if err := decodePod(canonical, got); err != nil {
			t.Fatalf("re-encoded: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("re-encoded: got  %+v\nwant %+v", got, want)
		}
	})
}

// BenchmarkDecodePod: a pod with managed fields, several containers and a
// status, read by DecodePod; BenchmarkDecodeCorePodAndTrim reads the same
// bytes as the informer did before (the API machinery, then FromPod).
func BenchmarkDecodePod(b *testing.B) {
	data := encode(b, samplePods()[0])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePod(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCorePodAndTrim(b *testing.B) {
	data := encode(b, samplePods()[0])
	decoder := scheme.Codecs.UniversalDeserializer()
	b.ReportAllocs()
	for b.Loop() {
		obj, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = FromPod(obj.(*corev1.Pod))
	}
}

// Two pods decoded apart share the strings pods repeat (namespace, node,
// phase, label keys and values), and nothing the decoder read from.
func TestDecodeSharesRepeatedStrings(t *testing.T) {
	pod := samplePods()[0]
	first, second := encode(t, pod), encode(t, pod)
	a, err := DecodePod(first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodePod(second)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what, x, y string) {
		if x != y || (x != "" && unsafe.StringData(x) != unsafe.StringData(y)) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("node", a.NodeName, b.NodeName)
	same("phase", string(a.Phase), string(b.Phase))
	for k, v := range a.Labels {
		for k2, v2 := range b.Labels {
			if k == k2 {
				same("label key", k, k2)
				same("label "+k, v, v2)
			}
		}
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two pods with the same labels hold two maps")
	}
	other := pod.DeepCopy()
	other.Labels["role"] = "server"
	c, err := DecodePod(encode(t, other))
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(c.Labels).UnsafePointer() == reflect.ValueOf(a.Labels).UnsafePointer() || c.Labels["role"] != "server" || a.Labels["role"] != "client" {
		t.Errorf("pods with other labels share a map: %v and %v", a.Labels, c.Labels)
	}
	clear(first)
	if a.Namespace != pod.Namespace || a.Labels["app"] != pod.Labels["app"] {
		t.Errorf("the decoded pod changed with the bytes it was read from: %q %v", a.Namespace, a.Labels)
	}
}
