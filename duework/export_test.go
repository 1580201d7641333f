package duework

// CheckInvariants reports the first internal invariant of m that does not hold: the
// external tests call it after every operation they drive against the reference model.
func CheckInvariants(m *Memory) error { return m.check() }
