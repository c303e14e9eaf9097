package amqp

// Descriptor codes of the SASL frames (part 5.3.3).
const (
	DescSASLMechanisms uint64 = 0x40
	DescSASLInit       uint64 = 0x41
	DescSASLChallenge  uint64 = 0x42
	DescSASLResponse   uint64 = 0x43
	DescSASLOutcome    uint64 = 0x44
)

// SASL outcome codes.
const (
	SASLOK      uint8 = 0
	SASLAuth    uint8 = 1
	SASLSys     uint8 = 2
	SASLSysPerm uint8 = 3
	SASLSysTemp uint8 = 4
)

// SASLMechanisms advertises the server's mechanisms, in preference order.
type SASLMechanisms struct {
	Mechanisms []Symbol // mandatory
}

// Descriptor returns the frame's descriptor code.
func (*SASLMechanisms) Descriptor() uint64 { return DescSASLMechanisms }

// AppendAMQP encodes the frame body.
func (m *SASLMechanisms) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescSASLMechanisms)
	w.dst = AppendSymbolArray(w.dst, m.Mechanisms)
	w.count++
	return w.done()
}

func (m *SASLMechanisms) decodeFields(f *fields) error {
	f.mandatory(0)
	m.Mechanisms = f.symbols(0)
	return f.err
}

// Decode decodes the frame body.
func (m *SASLMechanisms) Decode(b []byte) error { return decodeInto(b, m) }

// SASLInit selects a mechanism and carries its initial response.
type SASLInit struct {
	Mechanism       Symbol // mandatory
	InitialResponse []byte
	Hostname        string
}

// Descriptor returns the frame's descriptor code.
func (*SASLInit) Descriptor() uint64 { return DescSASLInit }

// AppendAMQP encodes the frame body.
func (i *SASLInit) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescSASLInit)
	w.dst = AppendSymbol(w.dst, i.Mechanism)
	w.count++
	w.binary(i.InitialResponse)
	w.strOmitEmpty(i.Hostname)
	return w.done()
}

func (i *SASLInit) decodeFields(f *fields) error {
	f.mandatory(0)
	*i = SASLInit{Mechanism: f.sym(0), InitialResponse: f.binary(1), Hostname: f.str(2)}
	return f.err
}

// Decode decodes the frame body.
func (i *SASLInit) Decode(b []byte) error { return decodeInto(b, i) }

// SASLOutcome ends the SASL exchange.
type SASLOutcome struct {
	Code           uint8 // mandatory
	AdditionalData []byte
}

// Descriptor returns the frame's descriptor code.
func (*SASLOutcome) Descriptor() uint64 { return DescSASLOutcome }

// AppendAMQP encodes the frame body.
func (o *SASLOutcome) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescSASLOutcome)
	w.dst = append(w.dst, codeUbyte, o.Code)
	w.count++
	w.binary(o.AdditionalData)
	return w.done()
}

func (o *SASLOutcome) decodeFields(f *fields) error {
	f.mandatory(0)
	*o = SASLOutcome{Code: f.ubyte(0, 0), AdditionalData: f.binary(1)}
	return f.err
}

// Decode decodes the frame body.
func (o *SASLOutcome) Decode(b []byte) error { return decodeInto(b, o) }
