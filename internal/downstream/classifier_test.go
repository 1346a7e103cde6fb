package downstream_test

import (
	"github.com/meterline/meter-consumer/config"
	"github.com/meterline/meter-consumer/internal/classify"
)

// binaryClassifier classifies statuses as the binary does by default.
var binaryClassifier = func() *classify.HTTP {
	h, err := classify.NewHTTP(config.Default().Downstream.PermanentStatuses, nil)
	if err != nil {
		panic(err)
	}
	return h
}()
