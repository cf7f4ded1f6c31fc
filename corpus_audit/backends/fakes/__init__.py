"""Test support that ships with the package: tiny random-weight models built offline from
configs, for the project's own tests and benchmarks and for users' tests of their pipelines.
Nothing here is used by a stage."""
