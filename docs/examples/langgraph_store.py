"""Quick start: governed memory as a LangGraph store, remembered in one thread, recalled in another.

Run with MEMORY_API_URL and MEMORY_API_KEY set.
"""

import os
from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from memoryadmin_client import Client
from memoryadmin_client.langgraph_store import GovernedStore


class Chat(TypedDict):
    user: str
    message: str
    reply: str


def respond(state: Chat, runtime: Runtime[None]) -> dict[str, str]:
    assert runtime.store is not None
    namespace = (state["user"],)
    if state["message"].startswith("remember:"):
        runtime.store.put(
            namespace, "hobby", {"statement": state["message"].removeprefix("remember:").strip()}
        )
        return {"reply": "Noted."}
    found = runtime.store.search(namespace, query=state["message"])
    return {"reply": " / ".join(item.value["statement"] for item in found) or "I don't know yet."}


builder = StateGraph(Chat)
builder.add_node("respond", respond)
builder.add_edge(START, "respond")
builder.add_edge("respond", END)
store = GovernedStore(Client(os.environ["MEMORY_API_URL"], os.environ["MEMORY_API_KEY"]))
graph = builder.compile(checkpointer=InMemorySaver(), store=store)

for thread, message in [
    ("t1", "remember: Sings in a choir on Tuesdays."),
    ("t2", "What does Sam do on Tuesdays?"),
]:
    result = graph.invoke(
        {"user": "sam", "message": message, "reply": ""}, {"configurable": {"thread_id": thread}}
    )
    print(f"[{thread}] {message} -> {result['reply']}")
