"""Registered study analyses (registry slot ``analysis``): each module adds tables and plots to a study page.

Each analysis is ``build(config, context: embreg.studies.sections.AnalysisContext) -> Section``.
"""
