package slim

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/intern"
)

// The API server's protobuf, read straight into Pods: what FromPod keeps of
// a corev1.Pod decoded by the API machinery, without decoding (and
// allocating) the rest of it — managed fields, the spec's containers but
// their ports, the status but its phase. Field numbers are those of
// k8s.io/api/core/v1/generated.proto and k8s.io/apimachinery's
// generated.proto, which never change; TestDecodeMatchesFromPod checks them
// against the API machinery's own encoding.

// protobufMagic starts every protobuf object the API server sends
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// field is one field of a protobuf message: its number, and its value as
// bytes (length-delimited) or as an integer (varint).
type field struct {
	num protowire.Number
	typ protowire.Type
	b   []byte
	x   uint64
}

// each calls f for every field of the message b, in order. It is stricter
// than the API machinery's generated decoders, which tolerate some malformed
// input (a map key running past its entry, unmatched group markers) that an
// API server never sends.
func each(b []byte, f func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		fl := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			fl.b, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			fl.x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// bytesOf is the field's length-delimited value; a field of another wire
// type under a number that should hold one is malformed.
func (f field) bytesOf() ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, fmt.Errorf("field %d has wire type %d, want bytes", f.num, f.typ)
	}
	return f.b, nil
}

func (f field) varint() (uint64, error) {
	if f.typ != protowire.VarintType {
		return 0, fmt.Errorf("field %d has wire type %d, want varint", f.num, f.typ)
	}
	return f.x, nil
}

func (f field) str() (string, error) {
	b, err := f.bytesOf()
	return string(b), err
}

// shared is str for a value many pods repeat (namespace, node, phase, label
// keys and values, port names): one copy for all (package intern).
func (f field) shared() (string, error) {
	b, err := f.bytesOf()
	return intern.Bytes(b), err
}

// unwrap strips the magic and the runtime.Unknown envelope of an object of
// kind want that the API server encoded, returning the object's own bytes.
func unwrap(b []byte, want string) (raw []byte, err error) {
	if !bytes.HasPrefix(b, protobufMagic) {
		return nil, fmt.Errorf("not a Kubernetes protobuf object (no magic prefix; was protobuf asked for?)")
	}
	var kind string
	err = each(b[len(protobufMagic):], func(f field) error {
		var err error
		switch f.num {
		case 1: // typeMeta
			var tm []byte
			if tm, err = f.bytesOf(); err == nil {
				err = each(tm, func(f field) (err error) {
					if f.num == 2 { // kind
						kind, err = f.str()
					}
					return err
				})
			}
		case 2: // raw
			raw, err = f.bytesOf()
		case 3: // contentEncoding
			var enc string
			if enc, err = f.str(); err == nil && enc != "" {
				err = fmt.Errorf("content encoding %q is not supported", enc)
			}
		}
		return err
	})
	if err == nil && kind != want {
		err = fmt.Errorf("object of kind %q where a %s was expected", kind, want)
	}
	return raw, err
}

// decodePod reads a Pod message into p.
func decodePod(b []byte, p *Pod) error {
	return each(b, func(f field) error {
		if f.num < 1 || f.num > 3 {
			return nil
		}
		v, err := f.bytesOf()
		if err != nil {
			return fmt.Errorf("pod: %w", err)
		}
		switch f.num {
		case 1:
			err = decodeMeta(v, p)
		case 2:
			err = decodeSpec(v, p)
		case 3:
			err = each(v, func(f field) (err error) {
				if f.num == 1 { // phase
					var s string
					s, err = f.shared()
					p.Phase = corev1.PodPhase(s)
				}
				return err
			})
		}
		return err
	})
}

// decodeMeta reads the ObjectMeta fields Pod keeps. The labels are one map
// for every pod whose labels are encoded alike (intern.Labels): read-only.
func decodeMeta(b []byte, p *Pod) error {
	var enc []byte // the label entries, length-prefixed, one after another
	err := each(b, func(f field) (err error) {
		switch f.num {
		case 1:
			p.Name, err = f.str()
		case 3:
			p.Namespace, err = f.shared()
		case 5:
			var s string
			s, err = f.str()
			p.UID = types.UID(s)
		case 6:
			p.ResourceVersion, err = f.str()
		case 11, 12: // labels, annotations: map entries {1: key, 2: value}
			var entry, k, v []byte
			if entry, err = f.bytesOf(); err != nil {
				return err
			}
			if k, v, err = mapEntry(entry); err != nil {
				return err
			}
			if f.num == 11 {
				enc = protowire.AppendBytes(enc, entry)
			} else if string(k) == annotations.PodNetworks {
				p.Networks, p.Annotated = string(v), true
			}
		}
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		return nil
	})
	if err == nil && len(enc) > 0 {
		p.Labels = intern.Labels(enc, func() map[string]string { return labelMap(enc) })
	}
	return err
}

// mapEntry is a protobuf map entry's key and value.
func mapEntry(entry []byte) (k, v []byte, err error) {
	err = each(entry, func(e field) (err error) {
		switch e.num {
		case 1:
			k, err = e.bytesOf()
		case 2:
			v, err = e.bytesOf()
		}
		return err
	})
	return k, v, err
}

// labelMap builds the labels of enc, entries decodeMeta has already checked.
func labelMap(enc []byte) map[string]string {
	m := map[string]string{}
	for len(enc) > 0 {
		entry, n := protowire.ConsumeBytes(enc)
		if n < 0 {
			break
		}
		enc = enc[n:]
		k, v, _ := mapEntry(entry)
		m[intern.Bytes(k)] = intern.Bytes(v)
	}
	return m
}

// decodeSpec reads the node, host network and named container ports.
func decodeSpec(b []byte, p *Pod) error {
	return each(b, func(f field) (err error) {
		switch f.num {
		case 2: // containers
			var c []byte
			if c, err = f.bytesOf(); err == nil {
				err = each(c, func(f field) error {
					if f.num != 6 { // ports
						return nil
					}
					port, err := f.bytesOf()
					if err != nil {
						return err
					}
					return decodePort(port, p)
				})
			}
		case 10:
			p.NodeName, err = f.shared()
		case 11:
			var x uint64
			x, err = f.varint()
			p.HostNetwork = x != 0
		}
		if err != nil {
			return fmt.Errorf("spec: %w", err)
		}
		return nil
	})
}

// decodePort reads a ContainerPort, kept when it has a name.
func decodePort(b []byte, p *Pod) error {
	var np NamedPort
	err := each(b, func(f field) (err error) {
		switch f.num {
		case 1:
			np.Name, err = f.shared()
		case 3:
			var x uint64
			x, err = f.varint()
			np.Port = int32(x)
		case 4:
			var s string
			s, err = f.shared()
			np.Protocol = corev1.Protocol(s)
		}
		return err
	})
	if err == nil && np.Name != "" {
		p.NamedPorts = append(p.NamedPorts, np)
	}
	return err
}

// DecodePod reads a pod the API server encoded as protobuf (magic, envelope
// and Pod message) into a Pod.
func DecodePod(b []byte) (*Pod, error) {
	raw, err := unwrap(b, "Pod")
	if err != nil {
		return nil, err
	}
	p := &Pod{}
	if err := decodePod(raw, p); err != nil {
		return nil, err
	}
	return p, nil
}

// DecodePodList reads a PodList the API server encoded as protobuf.
func DecodePodList(b []byte) (*PodList, error) {
	raw, err := unwrap(b, "PodList")
	if err != nil {
		return nil, err
	}
	l := &PodList{}
	err = each(raw, func(f field) error {
		switch f.num {
		case 1: // ListMeta
			v, err := f.bytesOf()
			if err != nil {
				return err
			}
			return each(v, func(f field) (err error) {
				switch f.num {
				case 2:
					l.ResourceVersion, err = f.str()
				case 3:
					l.Continue, err = f.str()
				case 4:
					var x uint64
					if x, err = f.varint(); err == nil {
						n := int64(x)
						l.RemainingItemCount = &n
					}
				}
				return err
			})
		case 2: // items
			v, err := f.bytesOf()
			if err != nil {
				return err
			}
			p := &Pod{}
			if err := decodePod(v, p); err != nil {
				return fmt.Errorf("item %d: %w", len(l.Items), err)
			}
			l.Items = append(l.Items, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding pod list: %w", err)
	}
	return l, nil
}
