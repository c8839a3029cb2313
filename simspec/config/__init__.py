"""Scenarios: plain frozen data (:mod:`~simspec.config.scenario`) and the one loader that
reads files, applies overrides and resolves names (:mod:`~simspec.config.load`)."""
