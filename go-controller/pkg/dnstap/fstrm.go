package dnstap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ContentType is the Frame Streams content type of dnstap.
const ContentType = "protobuf:dnstap.Dnstap"

// Frame Streams control frame types and fields
// (https://farsightsec.github.io/fstrm/).
const (
	controlAccept = 0x01
	controlStart  = 0x02
	controlStop   = 0x03
	controlReady  = 0x04
	controlFinish = 0x05

	fieldContentType = 0x01

	// maxControlLen bounds a control frame (type and fields), as the
	// reference implementations do.
	maxControlLen = 512
)

var (
	errFrameTooLarge = errors.New("data frame larger than the limit")
	errBadControl    = errors.New("malformed control frame")
)

// frame is one Frame Streams frame: a data frame (data) or a control frame
// (control, with its content type fields).
type frame struct {
	control      uint32 // 0 for a data frame
	contentTypes []string
	data         []byte // valid until the next call of next
}

func (f frame) String() string {
	if f.control == 0 {
		return fmt.Sprintf("data frame of %d bytes", len(f.data))
	}
	return controlName(f.control) + " control frame"
}

func controlName(t uint32) string {
	switch t {
	case controlAccept:
		return "ACCEPT"
	case controlStart:
		return "START"
	case controlStop:
		return "STOP"
	case controlReady:
		return "READY"
	case controlFinish:
		return "FINISH"
	}
	return fmt.Sprintf("unknown (%d)", t)
}

// hasContentType says whether the control frame lists the dnstap content
// type.
func (f frame) hasContentType() bool {
	return slices.Contains(f.contentTypes, ContentType)
}

// frameReader reads frames, refusing data frames longer than max.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 16<<10), max: max}
}

// next reads the next frame. io.EOF means the stream ended cleanly between
// frames; a stream ending inside a frame is io.ErrUnexpectedEOF.
func (fr *frameReader) next() (frame, error) {
	n, err := fr.uint32()
	if err != nil {
		return frame{}, err // io.EOF between frames
	}
	if n != 0 {
		if uint64(n) > uint64(fr.max) {
			return frame{}, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, fr.max)
		}
		if cap(fr.buf) < int(n) {
			fr.buf = make([]byte, n)
		}
		fr.buf = fr.buf[:n]
		if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
			return frame{}, unexpected(err)
		}
		return frame{data: fr.buf}, nil
	}
	// Escape: a control frame follows, with its own length.
	n, err = fr.uint32()
	if err != nil {
		return frame{}, unexpected(err)
	}
	if n < 4 || n > maxControlLen {
		return frame{}, fmt.Errorf("%w: length %d", errBadControl, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(fr.r, body); err != nil {
		return frame{}, unexpected(err)
	}
	return parseControl(body)
}

func (fr *frameReader) uint32() (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(fr.r, b[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b[:]), nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseControl decodes a control frame's body: its type, then fields of a
// type, a length and that many bytes. Fields other than content types are
// skipped.
func parseControl(body []byte) (frame, error) {
	f := frame{control: binary.BigEndian.Uint32(body)}
	if f.control == 0 {
		return frame{}, fmt.Errorf("%w: control type 0", errBadControl)
	}
	body = body[4:]
	for len(body) > 0 {
		if len(body) < 8 {
			return frame{}, fmt.Errorf("%w: truncated field", errBadControl)
		}
		typ, n := binary.BigEndian.Uint32(body), binary.BigEndian.Uint32(body[4:])
		body = body[8:]
		if uint64(n) > uint64(len(body)) {
			return frame{}, fmt.Errorf("%w: field longer than the frame", errBadControl)
		}
		if typ == fieldContentType {
			f.contentTypes = append(f.contentTypes, string(body[:n]))
		}
		body = body[n:]
	}
	return f, nil
}

// controlFrame encodes a control frame with its escape and lengths.
func controlFrame(typ uint32, contentTypes ...string) []byte {
	body := binary.BigEndian.AppendUint32(nil, typ)
	for _, ct := range contentTypes {
		body = binary.BigEndian.AppendUint32(body, fieldContentType)
		body = binary.BigEndian.AppendUint32(body, uint32(len(ct)))
		body = append(body, ct...)
	}
	out := binary.BigEndian.AppendUint32(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...)
}
