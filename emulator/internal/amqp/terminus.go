package amqp

// Descriptor codes of the link termini (part 3.5).
const (
	DescSource uint64 = 0x28
	DescTarget uint64 = 0x29
)

// SelectorFilterKey is the filter-set key Event Hubs clients use for their
// start-position selector, and SelectorFilterCode its descriptor.
const (
	SelectorFilterKey  Symbol = "apache.org:selector-filter:string"
	SelectorFilterCode uint64 = 0x0000468C00000004
)

// Source is the source terminus of a link. Fields the emulator does not
// interpret are kept so an echoed source matches what the client sent.
type Source struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties Map
	DistributionMode      Symbol
	Filter                Map
	DefaultOutcome        any
	Outcomes              []Symbol
	Capabilities          []Symbol
}

// Selector returns the selector-filter expression of the source, if any.
// The filter value is described(code or symbolic name, string).
func (s *Source) Selector() (string, bool) {
	v, ok := s.Filter.Get(SelectorFilterKey)
	if !ok {
		return "", false
	}
	if d, ok := v.(Described); ok {
		v = d.Value
	}
	expr, ok := v.(string)
	return expr, ok
}

// AppendAMQP encodes the source composite.
func (s *Source) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescSource)
	w.strOmitEmpty(s.Address)
	w.uintDef(s.Durable, 0)
	w.sym(s.ExpiryPolicy)
	w.uintDef(s.Timeout, 0)
	w.boolOmitFalse(s.Dynamic)
	w.fieldMap(s.DynamicNodeProperties)
	w.sym(s.DistributionMode)
	w.fieldMap(s.Filter)
	w.any(s.DefaultOutcome)
	w.symbols(s.Outcomes)
	w.symbols(s.Capabilities)
	return w.done()
}

func sourceFromValue(v any) (*Source, error) {
	if v == nil {
		return nil, nil
	}
	f, err := compositeFields(v, "source", DescSource)
	if err != nil {
		return nil, err
	}
	s := &Source{
		Address:               f.str(0),
		Durable:               f.uint(1, 0),
		ExpiryPolicy:          f.sym(2),
		Timeout:               f.uint(3, 0),
		Dynamic:               f.bool(4),
		DynamicNodeProperties: f.fieldMap(5),
		DistributionMode:      f.sym(6),
		Filter:                f.fieldMap(7),
		DefaultOutcome:        f.get(8),
		Outcomes:              f.symbols(9),
		Capabilities:          f.symbols(10),
	}
	return s, f.err
}

// Target is the target terminus of a link.
type Target struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties Map
	Capabilities          []Symbol
}

// AppendAMQP encodes the target composite.
func (t *Target) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescTarget)
	w.strOmitEmpty(t.Address)
	w.uintDef(t.Durable, 0)
	w.sym(t.ExpiryPolicy)
	w.uintDef(t.Timeout, 0)
	w.boolOmitFalse(t.Dynamic)
	w.fieldMap(t.DynamicNodeProperties)
	w.symbols(t.Capabilities)
	return w.done()
}

func targetFromValue(v any) (*Target, error) {
	if v == nil {
		return nil, nil
	}
	f, err := compositeFields(v, "target", DescTarget)
	if err != nil {
		return nil, err
	}
	t := &Target{
		Address:               f.str(0),
		Durable:               f.uint(1, 0),
		ExpiryPolicy:          f.sym(2),
		Timeout:               f.uint(3, 0),
		Dynamic:               f.bool(4),
		DynamicNodeProperties: f.fieldMap(5),
		Capabilities:          f.symbols(6),
	}
	return t, f.err
}
