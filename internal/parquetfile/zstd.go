package parquetfile

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdWindow is the back-reference window of the sinks' zstd encoders.
// Each page is compressed on its own (EncodeAll), and a page is about
// parquet-go's page buffer (256 KiB), so a larger window finds nothing
// more; parquet-go's own codec keeps the library default (8 MiB at the
// default level), and its pooled encoders held about 48 MiB of history
// in a 4-partition run.
const zstdWindow = 1 << 20

// ZstdCodec is the zstd page codec (parquet-go's compress.Codec) with a
// window fit for one page. Its encoders and decoders are pooled; it is
// safe for concurrent use.
type ZstdCodec struct {
	encoders sync.Pool // *zstd.Encoder
	decoders sync.Pool // *zstd.Decoder
}

func (c *ZstdCodec) String() string { return "ZSTD" }

func (c *ZstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *ZstdCodec) Encode(dst, src []byte) ([]byte, error) {
	e, _ := c.encoders.Get().(*zstd.Encoder)
	if e == nil {
		var err error
		e, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithWindowSize(zstdWindow), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, err
		}
	}
	defer c.encoders.Put(e)
	return e.EncodeAll(src, dst[:0]), nil
}

func (c *ZstdCodec) Decode(dst, src []byte) ([]byte, error) {
	d, _ := c.decoders.Get().(*zstd.Decoder)
	if d == nil {
		var err error
		if d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
			return nil, err
		}
	}
	defer c.decoders.Put(d)
	return d.DecodeAll(src, dst[:0])
}
