package service_test

import "github.com/meterline/meter-consumer/config"

// binaryClassifier classifies statuses as the binary does by default.
var binaryClassifier, _ = config.Default().Downstream.Classifier()
