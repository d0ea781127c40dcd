package metrics

// BuildInfo is the collector of kitd_build_info, the constant 1 whose
// labels say what is running: the usual way to put a version on a
// dashboard or to join it onto other series.
func BuildInfo(version, commit, goVersion string) Collector {
	labels := Label("version", version).With(Label("commit", commit)).With(Label("goversion", goVersion))
	return func(w *Writer) {
		w.Family("kitd_build_info", "The build of the running kitd: its version, the commit it was built from and its Go version; always 1.", TypeGauge)
		w.Uint("kitd_build_info", labels, 1)
	}
}
