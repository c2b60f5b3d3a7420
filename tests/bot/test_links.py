"""Decision links: every replica makes and reads the same ones (the key is the store's,
made once however many replicas start at once), and nobody makes one the bot did not."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agents import open_store
from bot import open_chat_state
from bot.links import PATH, LinkFor, Links
from tests.stores.conftest import store_url

LINK = LinkFor(run_id="appr_1", tool_call_id="call_appr_1", user_id="U0BOB0001")


async def test_replicas_starting_at_once_sign_alike_and_read_each_others_links(
    durable_url: str,
) -> None:
    stores = [open_store(durable_url) for _ in range(4)]
    chats = [open_chat_state(store) for store in stores]
    try:
        replicas = [Links(chat, "https://approvals.example.com/") for chat in chats]
        made = await asyncio.gather(*(links.url(LINK) for links in replicas))
        assert len(set(made)) == 1
        assert made[0].startswith(f"https://approvals.example.com{PATH}")
        token = made[0].rsplit("/", 1)[1]
        for links in replicas:
            assert await links.read(token) == LINK
        other = LinkFor(run_id=LINK.run_id, tool_call_id=LINK.tool_call_id, user_id="U0EVE0001")
        assert await replicas[1].url(other) != made[0], "a link is one person's"

        await replicas[0].spend(LINK)
        assert await replicas[3].spent(LINK)
        assert not await replicas[3].spent(other)
    finally:
        for chat in chats:
            await chat.close()
        for store in stores:
            await store.close()


async def test_a_link_the_bot_did_not_sign_reads_as_none(tmp_path: Path) -> None:
    async with store_url("sqlite", tmp_path) as url:
        store, elsewhere = open_store(url), open_store(f"sqlite:///{tmp_path}/other.db")
        mine, theirs = open_chat_state(store), open_chat_state(elsewhere)
        try:
            links, other_bot = Links(mine), Links(theirs)
            token = (await links.url(LINK)).removeprefix(PATH)
            assert await links.read(token) == LINK
            assert await other_bot.read(token) is None, "another bot's key"
            for bad in ("", "x", token[:-2], token + "A", "a" * 2000, token.replace(".", "")):
                assert await links.read(bad) is None
        finally:
            for each in (mine, theirs):
                await each.close()
            for each_store in (store, elsewhere):
                await each_store.close()
