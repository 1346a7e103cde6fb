package deploy_test

// The situations of issue 37, each on the model of fleetmodel_test.go with
// the alerts it is expected to raise. Minutes count from the replay's start.
func situations() []situation {
	p0 := []fleetID{fleetP0}
	return []situation{
		{
			name: "healthy fleet, two hours, with a rollout at 60m", minutes: 120, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				switch {
				case m == 60: // the surge pod c starts beside a and b
					w.pods = []string{"a", "b", "c"}
				case m == 61: // a goes, d starts
					w.pods, w.down = []string{"a", "b", "c", "d"}, map[string]bool{"a": true}
				case m >= 62:
					w.pods = []string{"c", "d"}
				}
				return w
			},
			want:   nil,
			notify: []string{},
		},
		{
			name: "NATS unreachable from 20m to 50m", minutes: 120, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				w.natsDown = m >= 20 && m < 50
				return w
			},
			want: []firing{
				{"MeterConsumerNATSUnreachable", of(fleetP0), 25, 50},
				{"MeterConsumerNotConsuming", of(fleetP0), 30, 50},
				{"MeterConsumerNoProgress", of(fleetP0), 30, 50},
			},
			notify: []string{"MeterConsumerNATSUnreachable"},
		},
		{
			name: "the rate engine down from 30m to 50m", minutes: 150, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				w.engineDown = m >= 30 && m < 50
				return w
			},
			want: []firing{
				{"MeterConsumerBreakerOpenEverywhere", of(fleetP0), 35, 50},
				{"MeterConsumerNoProgress", of(fleetP0), 40, 50},
				{"MeterConsumerBreakerOpen", of(fleetP0), 41, 50},
			},
			notify: []string{"MeterConsumerBreakerOpenEverywhere"},
		},
		{
			name: "a head-end sending 10% invalid reads from 20m to 80m", minutes: 150, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				if m >= 20 && m < 80 {
					w.invalid = 0.1
				}
				return w
			},
			want: []firing{
				{"MeterConsumerHeadEndInvalidReads", of(fleetP0), 35, 109},
			},
			notify: []string{"MeterConsumerHeadEndInvalidReads"},
		},
		{
			name: "a trickle of dead letters: 1 read/s, one exhausted every 10 minutes", minutes: 120, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				w.arrivals, w.exhausted = 60, m%10 == 5
				return w
			},
			want:   nil,
			notify: []string{},
		},
		{
			name: "a trickle of expired reads: one every 10 minutes from 10m to 60m", minutes: 150, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				w.arrivals, w.expired = 60, m >= 10 && m <= 60 && m%10 == 0
				return w
			},
			want: []firing{
				{"MeterConsumerReadsExpired", of(fleetP0), 11, 120},
			},
			notify: []string{"MeterConsumerReadsExpired"},
		},
		{
			name: "partition 0's fleet down from 20m to 60m, partition 1's up", minutes: 120, fleets: []fleetID{fleetP0, fleetP1},
			world: func(m int, f fleetID) world {
				w := healthy()
				if f == fleetP0 && m >= 20 && m < 60 {
					w.down = map[string]bool{"a": true, "b": true}
				}
				return w
			},
			want: []firing{
				{"MeterConsumerDown", map[string]string{"service": fleetP0.service}, 25, 60},
				// the reads that waited drain late: the consumer's own SLO
				{"MeterConsumerBillingSLOBurn", of(fleetP0), 64, 102},
			},
			notify: []string{"MeterConsumerDown", "MeterConsumerBillingSLOBurn"},
		},
		{
			name: "a slow fleet: 1,000 reads a minute, 800 billed, for 90 minutes", minutes: 150, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				if m < 90 {
					w.perPod = 400
				}
				return w
			},
			want: []firing{
				{"MeterConsumerBacklogGrowing", of(fleetP0), 65, 92},
				{"MeterConsumerBillingSLOBurn", of(fleetP0), 85, 121},
			},
			notify: []string{"MeterConsumerBacklogGrowing", "MeterConsumerBillingSLOBurn"},
		},
		{
			name: "a replica crash-looping, a restart every 4 minutes from 10m to 50m", minutes: 120, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				if m >= 10 && m < 50 && m%4 == 2 {
					w.restart = map[string]bool{"a": true}
				}
				return w
			},
			want: []firing{
				{"MeterConsumerCrashLooping", map[string]string{"pod": "meter-consumer-p0-a"}, 28, 68},
			},
			notify: []string{"MeterConsumerCrashLooping"},
		},
		{
			name: "the records bucket deleted at 30m, recreated at 50m", minutes: 90, fleets: p0,
			world: func(m int, _ fleetID) world {
				w := healthy()
				w.bucketGone = m >= 30 && m < 50
				return w
			},
			want: []firing{
				{"MeterConsumerRecordsBucketMissing", of(fleetP0), 32, 50},
			},
			notify: []string{"MeterConsumerRecordsBucketMissing"},
		},
	}
}
