"""The sweep engine (`flows sweep`): a grid (`grid`), what an experiment provides and a
sweep returns (`spec`), points grouped into batches of equal shape (`batches`), each
point's file written and read back with its checks (`points`), the output folder (`folder`),
and the run, resumable and optionally distributed, with its progress (`engine`).
"""
