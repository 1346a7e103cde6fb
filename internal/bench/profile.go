package bench

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// errProfileBusy is returned, without calling f, when a CPU profile is
// already running (for example with --cpuprofile).
var errProfileBusy = errors.New("a CPU profile is already running")

// cpuProfile profiles f and returns the CPU time by the side label of the
// goroutines it was spent in ("" for unlabelled: the runtime, the GC, and
// goroutines started outside a labelled region). nats-server replaces the
// labels of its JetStream goroutines with its own (account, stream,
// consumer): those count as the server's.
func cpuProfile(f func() error) (map[string]time.Duration, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, fmt.Errorf("%w: %w", errProfileBusy, err)
	}
	err := f()
	pprof.StopCPUProfile()
	if err != nil {
		return nil, err
	}
	return cpuBySide(buf.Bytes())
}

// cpuBySide sums the CPU nanoseconds of a gzipped pprof profile by the value
// of its side label. It reads only what it needs of profile.proto: sample
// types (1), samples (2: values 2, labels 3) and the string table (6).
func cpuBySide(gz []byte) (map[string]time.Duration, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	type sample struct {
		values []int64
		labels [][2]int64 // key, str (string table indexes)
	}
	var types []int64 // string index of each sample type
	var samples []sample
	var strs []string
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			return eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 {
					types = append(types, int64(x))
				}
				return nil
			})
		case num == 2 && typ == protowire.BytesType:
			var s sample
			err := eachField(v, func(n protowire.Number, t protowire.Type, inner []byte, x uint64) error {
				switch {
				case n == 2 && t == protowire.VarintType:
					s.values = append(s.values, int64(x))
				case n == 2 && t == protowire.BytesType:
					for len(inner) > 0 {
						y, m := protowire.ConsumeVarint(inner)
						if m < 0 {
							return protowire.ParseError(m)
						}
						s.values, inner = append(s.values, int64(y)), inner[m:]
					}
				case n == 3 && t == protowire.BytesType:
					var l [2]int64
					err := eachField(inner, func(ln protowire.Number, _ protowire.Type, _ []byte, y uint64) error {
						if ln == 1 || ln == 2 {
							l[ln-1] = int64(y)
						}
						return nil
					})
					s.labels = append(s.labels, l)
					return err
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case num == 6 && typ == protowire.BytesType:
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	cpu := -1
	for i, t := range types {
		if str(t) == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil, errors.New("profile: no cpu sample type")
	}
	out := map[string]time.Duration{}
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		side, account := "", false
		for _, l := range s.labels {
			switch str(l[0]) {
			case sideLabel:
				side = str(l[1])
			case "account": // nats-server labels its JetStream goroutines itself
				account = true
			}
		}
		if side == "" && account {
			side = sideServer
		}
		out[side] += time.Duration(s.values[cpu])
	}
	return out, nil
}

// eachField calls f with each field of a protobuf message: v for a
// length-delimited field, x for a varint or fixed one.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
