"""Human preference between text-to-image models: battles, votes and ratings (METHODS §3).

- :mod:`.battles`: draw pairs of images of the same prompt from two models (balanced over
  model pairs, reproducible from a seed), write the pair manifest, read annotators' vote CSVs
  (errors name the file and line);
- :mod:`.page`: the self-contained HTML voting page (images inlined, no network, keyboard
  voting, CSV download in the browser);
- :mod:`.elo`: Elo (k = 4, scale 400, base 10, initial 1000) in the given order and as median
  and interval over shuffled orders, Bradley-Terry maximum-likelihood ratings on the Elo
  scale, battle counts and win rates per model pair.

Every function takes and returns pandas DataFrames whose columns are documented with the
function (docs/preferences.md has the file formats and a worked example).
"""

from __future__ import annotations
