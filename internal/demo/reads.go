package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// regions are the subject tokens reads are published under.
var regions = []string{"north", "south", "east", "west"}

// meterUnits gives each meter its unit, by meter number modulo its length.
var meterUnits = []string{"kWh", "kWh", "kWh", "kWh", "kWh", "kWh", "m3", "kWh", "therm", "kvarh"}

// readAtLayout is RFC 3339 with milliseconds and an explicit offset.
const readAtLayout = "2006-01-02T15:04:05.000Z07:00"

// wireRead is the JSON body of a valid read.
type wireRead struct {
	MeterID        string `json:"meter_id"`
	ReadAt         string `json:"read_at"`
	Quantity       string `json:"quantity"`
	Unit           string `json:"unit"`
	IdempotencyKey string `json:"idempotency_key"`
}

// read is one message ready to publish.
type read struct {
	region  string
	msgID   string
	body    []byte
	invalid string // name of the fault; "" for a valid read
}

// generator builds the sequence of reads. It is deterministic given its Rand
// and the times passed to next, and is not safe for concurrent use.
type generator struct {
	rand           *rand.Rand
	invalidPercent int
	registers      []uint64 // thousandths of a unit; valid once started
	started        []bool
	seq            uint64
	nextFault      int
}

func newGenerator(r *rand.Rand, meters, invalidPercent int) *generator {
	return &generator{
		rand:           r,
		invalidPercent: invalidPercent,
		registers:      make([]uint64, meters),
		started:        make([]bool, meters),
	}
}

// next builds the read taken at now.
func (g *generator) next(now time.Time) read {
	g.seq++
	invalid := g.rand.IntN(100) < g.invalidPercent
	m := g.rand.IntN(len(g.registers))
	if !g.started[m] {
		g.started[m] = true
		g.registers[m] = uint64(g.rand.Int64N(100_000_000)) // up to 99999.999
	}
	g.registers[m] += 1 + uint64(g.rand.IntN(2500)) // 0.001 to 2.500

	id := meterID(m)
	key := fmt.Sprintf("he:%s:%d:%d", id, now.UnixNano(), g.seq)
	w := wireRead{
		MeterID:        id,
		ReadAt:         now.Format(readAtLayout),
		Quantity:       formatThousandths(g.registers[m]),
		Unit:           meterUnits[m%len(meterUnits)],
		IdempotencyKey: key,
	}
	r := read{region: regions[m%len(regions)], msgID: key}
	if invalid {
		f := faults[g.nextFault]
		g.nextFault = (g.nextFault + 1) % len(faults)
		r.body, r.invalid = f.body(w, now), f.name
		return r
	}
	r.body = marshal(w)
	return r
}

// meterID names meter number m (0-based).
func meterID(m int) string {
	return fmt.Sprintf("MTR-%05d", m+1)
}

// formatThousandths renders v/1000 with exactly three decimals.
func formatThousandths(v uint64) string {
	frac := strconv.FormatUint(v%1000, 10)
	for len(frac) < 3 {
		frac = "0" + frac
	}
	return strconv.FormatUint(v/1000, 10) + "." + frac
}

// marshal encodes v, whose types cannot fail to encode.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("demo: encoding %T: %v", v, err))
	}
	return b
}
