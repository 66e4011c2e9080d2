"""The three query languages' front end: text to a validated tree, and back to canonical text.

One stage per module, shared by TPStream, SASE+ and COGRA: ``tokens`` → ``parser`` (cursor,
expression grammar, comma lists, RETURN items, PARTITION BY, equivalence tests) → ``ast`` and
``clauses`` (nodes) → ``validate_<language>`` (names, types and each language's rules; the
compilers never see an invalid tree) → ``printer`` (canonical text) → ``identity`` (the query id
hashed from it). ``tpstream``, ``sase`` and ``cogra`` add each language's keywords and
statements, ``allen`` the vocabulary of temporal relations, ``cogra_sugar`` COGRA's Appendix C
rewrite, and ``dialect`` bundles each language's front end by its first keyword. Nothing here
imports an engine; :mod:`situflow.languages` joins each dialect to its compiler.
"""
