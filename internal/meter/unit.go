package meter

// Unit is the unit a quantity is measured in.
type Unit string

// The units a read may use. Names are case-sensitive.
const (
	UnitWh    Unit = "Wh"
	UnitKWh   Unit = "kWh"
	UnitMWh   Unit = "MWh"
	UnitVarh  Unit = "varh"
	UnitKVarh Unit = "kvarh"
	UnitM3    Unit = "m3"
	UnitL     Unit = "L"
	UnitGal   Unit = "gal"
	UnitFt3   Unit = "ft3"
	UnitCcf   Unit = "ccf"
	UnitTherm Unit = "therm"
)

// Units returns every valid unit.
func Units() []Unit {
	return []Unit{
		UnitWh, UnitKWh, UnitMWh, UnitVarh, UnitKVarh,
		UnitM3, UnitL, UnitGal, UnitFt3, UnitCcf, UnitTherm,
	}
}

// Valid reports whether u is one of the Unit constants.
func (u Unit) Valid() bool {
	_, ok := parseUnit([]byte(u))
	return ok
}

// parseUnit returns the constant spelled b, without allocating.
func parseUnit(b []byte) (Unit, bool) {
	switch string(b) {
	case "Wh":
		return UnitWh, true
	case "kWh":
		return UnitKWh, true
	case "MWh":
		return UnitMWh, true
	case "varh":
		return UnitVarh, true
	case "kvarh":
		return UnitKVarh, true
	case "m3":
		return UnitM3, true
	case "L":
		return UnitL, true
	case "gal":
		return UnitGal, true
	case "ft3":
		return UnitFt3, true
	case "ccf":
		return UnitCcf, true
	case "therm":
		return UnitTherm, true
	}
	return "", false
}
