"""RELINE's room: load testing. `reward` the frame-time threshold and the load reward on the PPO
explorer; `objective` is `playtester run load` (the run's threshold, the reward on its explorer);
`agent` the games the load agent plays and the baseline's episodes; `lowfps` the low-FPS points
every report with frame times draws; `stats` RELINE's statistics (Mann–Whitney, Holm, Cliff's
delta, Spearman)."""
