"""The ground floor every stage may use: running a command and streaming its output (`runner`), a
running step watched and interrupted (`progress`), one build per tree (`lock`), and where each
row's output is kept (`logs`). It imports nothing of the stages above it.
"""
