package reliability_test

import (
	"testing"

	"github.com/meterline/meter-consumer/internal/proctest"
)

var binary string

func TestMain(m *testing.M) { proctest.Main(m, true, &binary) }
