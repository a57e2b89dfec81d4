"""Experiments: config files, traffic, metrics, reports, plots and sweeps (fabric-agnostic).

* :mod:`~uet.experiments.schema` / :mod:`~uet.experiments.config`: experiment TOML files,
  ``--set`` overrides, validation with key paths and line numbers.
* :mod:`~uet.experiments.workload`, :mod:`~uet.experiments.traffic`,
  :mod:`~uet.experiments.collectives`, :mod:`~uet.experiments.htsim_cm`: workloads
  (flows with dependencies), generators, all-reduce checks, htsim connection matrices.
* :mod:`~uet.experiments.impairments`: link selections -> per-link fabric impairments.
* :mod:`~uet.experiments.ideal`, :mod:`~uet.experiments.metrics`,
  :mod:`~uet.experiments.results`, :mod:`~uet.experiments.timeseries`: what a run reports.
* :mod:`~uet.experiments.report`, :mod:`~uet.experiments.plots`,
  :mod:`~uet.experiments.progress`: terminal table, files, PNGs, progress bar.
* :mod:`~uet.experiments.sweep`, :mod:`~uet.experiments.executor`: parameter grids run in
  parallel; :mod:`~uet.experiments.command`: the ``uet run`` command line.

Submodules are imported on use (matplotlib and rich are not loaded by ``import
uet.experiments``).
"""
