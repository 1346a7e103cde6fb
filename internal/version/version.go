package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Set at link time with -ldflags -X (see the package documentation); empty
// when not stamped.
var (
	version  string
	revision string
)

// Unknown values.
const (
	DevVersion      = "dev"     // no stamped version and no module version
	UnknownRevision = "unknown" // no stamped revision and no vcs.revision
)

// Info identifies a build.
type Info struct {
	Version   string // e.g. v1.4.0; DevVersion when unknown
	Revision  string // VCS commit, "-dirty" appended for a modified tree; UnknownRevision when unknown
	GoVersion string // e.g. go1.26.8
}

// Get returns the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, revision, bi)
}

// resolve prefers the stamped values, then the build information, then the
// unknown values.
func resolve(stampedVersion, stampedRevision string, bi *debug.BuildInfo) Info {
	i := Info{Version: stampedVersion, Revision: stampedRevision, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		if v := bi.Main.Version; i.Version == "" && v != "" && v != "(devel)" {
			i.Version = v
		}
		if i.Revision == "" {
			var rev string
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "-dirty"
			}
			i.Revision = rev
		}
	}
	if i.Version == "" {
		i.Version = DevVersion
	}
	if i.Revision == "" {
		i.Revision = UnknownRevision
	}
	return i
}

// String is the line `consumer --version` prints.
func (i Info) String() string {
	return fmt.Sprintf("meter-consumer %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// UserAgent returns "meter-consumer/<version>", with any character an HTTP
// token does not allow replaced by '_', so a stamped version cannot break
// the header.
func (i Info) UserAgent() string {
	v := strings.Map(func(r rune) rune {
		if r < 0x80 && tokenChar[r] {
			return r
		}
		return '_'
	}, i.Version)
	return "meter-consumer/" + v
}

// tokenChar marks the characters of an HTTP token (RFC 9110, section 5.6.2).
var tokenChar = func() (t [0x80]bool) {
	for r := '0'; r <= '9'; r++ {
		t[r] = true
	}
	for r := 'a'; r <= 'z'; r++ {
		t[r], t[r-'a'+'A'] = true, true
	}
	for _, r := range "!#$%&'*+-.^_`|~" {
		t[r] = true
	}
	return t
}()

// BuildInfoName is the name of the gauge [Register] adds.
const BuildInfoName = "meter_consumer_build_info"

// Register adds the meter_consumer_build_info gauge to reg: always 1, with
// the labels version, revision and goversion, so a dashboard can show which
// build each replica runs and join it to other series.
func Register(reg prometheus.Registerer, i Info) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BuildInfoName,
		Help: "Always 1; the labels say which build of meter-consumer runs.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion,
		},
	})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register %s: %w", BuildInfoName, err)
	}
	return nil
}
