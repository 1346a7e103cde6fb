package demo_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"

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
