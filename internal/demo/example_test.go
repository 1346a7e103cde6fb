package demo_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/meterline/meter-consumer/internal/demo"
)

func ExampleNewRateEngine() {
	re, err := demo.NewRateEngine(demo.RateEngineOptions{
		Rand:      rand.New(rand.NewPCG(1, 2)),
		OKPercent: 100, // every new key is billed
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	body := `{"meter_id":"MTR-00042","read_at":"2026-11-30T07:00:00+01:00","quantity":"1234.567","unit":"kWh"}`
	for range 2 { // the second post is a replay
		req := httptest.NewRequest(http.MethodPost, demo.ReadsPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "MTR-00042@2026-11-30T06:00:00Z")
		rec := httptest.NewRecorder()
		re.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	st := re.Stats()
	fmt.Println("billed:", st.Billed, "duplicates:", st.Duplicates)
	// Output:
	// 200 {"status":"billed"}
	// 200 {"status":"duplicate"}
	// billed: 1 duplicates: 1
}

func ExampleSchedule_At() {
	fmt.Println(demo.DefaultSchedule)
	for _, elapsed := range []time.Duration{0, 75 * time.Second, 160 * time.Second, 200 * time.Second} {
		step, left := demo.DefaultSchedule.At(elapsed)
		fmt.Printf("at %v: %s for %v more\n", elapsed, demo.DefaultSchedule[step].Phase, left)
	}
	// Output:
	// 60s normal, 30s overload, 60s normal, 20s outage, repeated
	// at 0s: normal for 1m0s more
	// at 1m15s: overload for 15s more
	// at 2m40s: outage for 10s more
	// at 3m20s: normal for 30s more
}
