package pluginv1

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// BufferPool returns the gRPC buffer pool both ends of the native protocol
// use: power-of-two tiers from 256 B to 16 MiB, so a 50 KiB batch takes a
// 64 KiB buffer instead of zeroing one of gRPC's default 1 MiB buffers.
func BufferPool() mem.BufferPool {
	exps := make([]uint8, 0, 17)
	for e := uint8(8); e <= 24; e++ {
		exps = append(exps, e)
	}
	p, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		return mem.DefaultBufferPool()
	}
	return p
}

// Codec returns the gRPC codec both ends of the native protocol use: the
// protobuf wire format, like gRPC's default codec, but with buffers from
// pool (gRPC's default codec takes them from its global pool). Install it with
// grpc.ForceCodecV2 and grpc.ForceServerCodecV2.
func Codec(pool mem.BufferPool) encoding.CodecV2 { return codec{pool} }

type codec struct{ pool mem.BufferPool }

func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("pluginv1 codec: cannot marshal %T, not a proto.Message", v)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // safe: Size just ran
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("pluginv1 codec: cannot unmarshal into %T, not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	// proto.Unmarshal copies bytes fields, so buf can go back to the pool.
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}
