package amqp

import (
	"fmt"
)

// Descriptor codes of the message sections (part 3.2), in wire order.
const (
	DescHeader                uint64 = 0x70
	DescDeliveryAnnotations   uint64 = 0x71
	DescMessageAnnotations    uint64 = 0x72
	DescProperties            uint64 = 0x73
	DescApplicationProperties uint64 = 0x74
	DescData                  uint64 = 0x75
	DescAmqpSequence          uint64 = 0x76
	DescAmqpValue             uint64 = 0x77
	DescFooter                uint64 = 0x78
)

// Section is one section of an encoded message. Raw is the whole encoded
// section, Value the encoded value after its descriptor; both alias the
// input.
type Section struct {
	Code  uint64
	Raw   []byte
	Value []byte
}

// Sections splits an encoded message into its sections without decoding
// their contents, so stored messages can be re-emitted byte for byte.
func Sections(msg []byte) ([]Section, error) {
	var out []Section
	for off := 0; off < len(msg); {
		rest := msg[off:]
		if rest[0] != codeDescribed {
			return nil, &DecodeError{What: "message section", Offset: off, Reason: "not a described value"}
		}
		desc, dn, err := Decode(rest[1:])
		if err != nil {
			return nil, fmt.Errorf("message section at offset %d: %w", off, err)
		}
		code, ok := desc.(uint64)
		if !ok || code < DescHeader || code > DescFooter {
			return nil, &DecodeError{What: "message section", Offset: off, Reason: fmt.Sprintf("unknown section descriptor %v", desc)}
		}
		vn, err := Skip(rest[1+dn:])
		if err != nil {
			return nil, fmt.Errorf("message section %#x at offset %d: %w", code, off, err)
		}
		n := 1 + dn + vn
		out = append(out, Section{Code: code, Raw: rest[:n:n], Value: rest[1+dn : n : n]})
		off += n
	}
	return out, nil
}

// BatchPayloads returns the inner messages of an Event Hubs batch envelope
// (message-format BatchMessageFormat): the content of each data section.
func BatchPayloads(envelope []byte) ([][]byte, error) {
	secs, err := Sections(envelope)
	if err != nil {
		return nil, fmt.Errorf("batch envelope: %w", err)
	}
	var out [][]byte
	for _, s := range secs {
		if s.Code != DescData {
			continue
		}
		v, _, err := Decode(s.Value)
		if err != nil {
			return nil, fmt.Errorf("batch envelope data section: %w", err)
		}
		p, ok := v.([]byte)
		if !ok {
			return nil, &DecodeError{What: "batch envelope", Reason: fmt.Sprintf("data section holds %T", v)}
		}
		out = append(out, p)
	}
	return out, nil
}

// AppendWithAnnotations appends msg to dst with the entries of add merged
// into its message-annotations section (added or replaced, other user
// annotations kept). The section is created, in its spec position, when
// the message has none.
func AppendWithAnnotations(dst, msg []byte, add Map) ([]byte, error) {
	secs, err := Sections(msg)
	if err != nil {
		return dst, err
	}
	written := false
	writeAnn := func(existing Map) error {
		for _, kv := range add {
			existing = existing.Set(kv.Key, kv.Value)
		}
		dst = AppendDescriptor(dst, DescMessageAnnotations)
		var err error
		dst, err = Append(dst, existing)
		written = true
		return err
	}
	for _, s := range secs {
		switch {
		case s.Code == DescMessageAnnotations && !written:
			v, _, err := Decode(s.Value)
			if err != nil {
				return dst, fmt.Errorf("message-annotations: %w", err)
			}
			m, ok := v.(Map)
			if !ok && v != nil {
				return dst, &DecodeError{What: "message-annotations", Reason: fmt.Sprintf("holds %T, not a map", v)}
			}
			if err := writeAnn(append(Map(nil), m...)); err != nil {
				return dst, err
			}
			continue
		case s.Code > DescMessageAnnotations && !written:
			if err := writeAnn(nil); err != nil {
				return dst, err
			}
		}
		dst = append(dst, s.Raw...)
	}
	if !written {
		if err := writeAnn(nil); err != nil {
			return dst, err
		}
	}
	return dst, nil
}
