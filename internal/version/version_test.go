package version_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meterline/meter-consumer/internal/version"
)

func TestGet(t *testing.T) {
	i := version.Get()
	assert.NotEmpty(t, i.Version)
	assert.NotEmpty(t, i.Revision)
	assert.Equal(t, runtime.Version(), i.GoVersion)
}

func TestUserAgent(t *testing.T) {
	tests := []struct{ give, want string }{
		{"v1.4.0", "meter-consumer/v1.4.0"},
		{"v0.0.0-20261130070000-abcdef123456+dirty", "meter-consumer/v0.0.0-20261130070000-abcdef123456+dirty"},
		{"1.4 (rc/1)\r\nX: y", "meter-consumer/1.4__rc_1___X__y"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, version.Info{Version: tt.give}.UserAgent())
		})
	}
}

func TestRegister(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	info := version.Info{Version: "v1.4.0", Revision: "abc123", GoVersion: "go1.26.8"}
	require.NoError(t, version.Register(reg, info))
	want := `
# HELP meter_consumer_build_info Always 1; the labels say which build of meter-consumer runs.
# TYPE meter_consumer_build_info gauge
meter_consumer_build_info{goversion="go1.26.8",revision="abc123",version="v1.4.0"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), version.BuildInfoName))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Error(t, version.Register(reg, info), "registered twice")
}

func ExampleInfo() {
	i := version.Info{Version: "v1.4.0", Revision: "3f7a46c", GoVersion: "go1.26.8"}
	fmt.Println(i)
	fmt.Println(i.UserAgent())
	// Output:
	// meter-consumer v1.4.0 (revision 3f7a46c, go1.26.8)
	// meter-consumer/v1.4.0
}
