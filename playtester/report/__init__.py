"""The run's report: `build.build_report` writes report.html, its maps and summary.json from the
run folder alone; `html` fills the page's template, `maps` draws the bird's-eye maps, `coverage`
measures where the agent has been."""
