package dnstap

import (
	"errors"
	"fmt"

	"github.com/miekg/dns"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"
)

// Field numbers and values of dnstap.proto (github.com/dnstap/dnstap.pb).
const (
	dnstapMessageField = 14 // Dnstap.message
	dnstapTypeField    = 15 // Dnstap.type
	dnstapTypeMessage  = 1  // Dnstap.Type MESSAGE

	messageTypeField     = 1  // Message.type
	messageResponseField = 14 // Message.response_message
	messageClientResp    = 6  // Message.Type CLIENT_RESPONSE
)

// clientResponse returns the DNS response carried by a dnstap frame when it
// is a CLIENT_RESPONSE message. isResponse is false for any other frame
// (queries, other message types); it is true with a nil response when the
// sender leaves the DNS message out (CoreDNS's dnstap without "full"). err is
// set when the protobuf does not parse.
func clientResponse(frame []byte) (response []byte, isResponse bool, err error) {
	var typ uint64
	var msg []byte
	err = fields(frame, func(num protowire.Number, wt protowire.Type, v uint64, b []byte) {
		switch {
		case num == dnstapTypeField && wt == protowire.VarintType:
			typ = v
		case num == dnstapMessageField && wt == protowire.BytesType:
			msg = b
		}
	})
	if err != nil {
		return nil, false, fmt.Errorf("dnstap protobuf: %w", err)
	}
	if typ != dnstapTypeMessage || msg == nil {
		return nil, false, nil
	}
	var mtype uint64
	err = fields(msg, func(num protowire.Number, wt protowire.Type, v uint64, b []byte) {
		switch {
		case num == messageTypeField && wt == protowire.VarintType:
			mtype = v
		case num == messageResponseField && wt == protowire.BytesType:
			response = b
		}
	})
	if err != nil {
		return nil, false, fmt.Errorf("dnstap Message protobuf: %w", err)
	}
	if mtype != messageClientResp {
		return nil, false, nil
	}
	return response, true, nil
}

// fields calls f for each field of a protobuf message: v is the value of a
// varint or fixed field, b the contents of a length-delimited one. Groups
// are skipped. A later occurrence of a field simply comes after an earlier
// one (the last one wins for scalars, as in protobuf).
func fields(b []byte, f func(num protowire.Number, wt protowire.Type, v uint64, b []byte)) error {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var bytes []byte
		switch wt {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if wt != protowire.StartGroupType {
			f(num, wt, v, bytes)
		}
	}
	return nil
}

// errDNS wraps the DNS messages that do not parse.
var errDNS = errors.New("DNS message does not parse")

// answers extracts from a DNS response its question name (normalized as
// dnsname.Normalize does) and the addresses the answer section gives for it,
// following CNAMEs. name is empty when the response is to be ignored: not a
// NOERROR response to one IN question for a valid name.
func answers(response []byte) (name string, out []Answer, err error) {
	var m dns.Msg
	if err := m.Unpack(response); err != nil {
		return "", nil, fmt.Errorf("%w: %v", errDNS, err)
	}
	if !m.Response || m.Opcode != dns.OpcodeQuery || m.Rcode != dns.RcodeSuccess || len(m.Question) != 1 {
		return "", nil, nil
	}
	q := m.Question[0]
	if q.Qclass != dns.ClassINET {
		return "", nil, nil
	}
	name, ok := dnsname.Normalize(q.Name)
	if !ok {
		return "", nil, nil
	}
	return name, dnsname.AnswerAddrs(m.Answer, q.Name), nil
}
