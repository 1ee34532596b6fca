#!/usr/bin/env python3
"""Writes the seed corpora of troupe's fuzz targets (see docs/testing.md).

Small, realistic inputs: provider streams, configs, scripts, commands, paths,
schedules and tiny documents. The files are committed; run this again after
changing it (it rewrites only the files it names, so inputs a long fuzz run
added or regression inputs stay):

    python3 scripts/fuzz-seeds.py
"""
import io
import os
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def put(crate, target, name, data):
    folder = os.path.join(ROOT, crate, "src", "__fuzz__", target, "corpus")
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def package(parts):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, content in parts:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            z.writestr(info, content)
    return buf.getvalue()


# --- runtime: streams. The first byte chooses the size of the network reads.
OPENAI_TOOLS = "".join(
    "data: " + line + "\n\n"
    for line in [
        '{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "},"finish_reason":null}]}',
        '{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup_weather","arguments":""}}]},"finish_reason":null}]}',
        '{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\\"pa"}}]},"finish_reason":null}]}',
        '{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\":\\"Paris\\"}"}}]},"finish_reason":null}]}',
        '{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\\":\\"/tmp/\u00e9t\u00e9\\"}"}}]},"finish_reason":null}]}',
        '{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        '{"id":"c1","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":100}}}',
        "[DONE]",
    ]
)
OPENAI_TEXT = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}\r\n\r\n'
    ": keep-alive\r\n\r\n"
    'data: {"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}]}\n\n'
    'data: {"choices":null,"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'
)
OPENAI_ERROR = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    'data: {"error":{"type":"server_error","message":"overloaded"}}\n\n'
)
put("runtime", "openai_stream", "tool_calls", b"\x07" + OPENAI_TOOLS.encode())
put("runtime", "openai_stream", "text", b"\x00" + OPENAI_TEXT.encode())
put("runtime", "openai_stream", "error_midway", b"\x03" + OPENAI_ERROR.encode())

ANTHROPIC = [
    ("message_start", '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":1000,"cache_read_input_tokens":4000,"output_tokens":1}}}'),
    ("ping", '{"type":"ping"}'),
    ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":0}'),
    ("content_block_start", '{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking \u00e9t\u00e9."}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":1}'),
    ("content_block_start", '{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_a","name":"lookup_weather","input":{}}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": "}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\\"Paris\\"}"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":2}'),
    ("content_block_start", '{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_b","name":"list_files","input":{"path":"."}}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":3}'),
    ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}'),
    ("message_stop", '{"type":"message_stop"}'),
]
put("runtime", "anthropic_stream", "tool_use",
    b"\x05" + "".join(f"event: {e}\ndata: {d}\n\n" for e, d in ANTHROPIC).encode())
put("runtime", "anthropic_stream", "overloaded",
    b"\x00" + (f"event: message_start\ndata: {ANTHROPIC[0][1]}\n\n"
               'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n').encode())
put("runtime", "sse", "openai", b"\x01" + OPENAI_TEXT.encode())
put("runtime", "sse", "anthropic", b"\x02" + "".join(f"event: {e}\r\ndata: {d}\r\n\r\n" for e, d in ANTHROPIC[:4]).encode())
put("runtime", "sse", "multiline", b"\x00event: x\ndata: line one\ndata:line two\n: comment\nid: 7\nretry: 10\n\ndata: caf\xc3\xa9\n")

# --- runtime: config.toml (NUL, then one key=value override) and models.toml
put("runtime", "config", "default", open(os.path.join(ROOT, "runtime/src/config/default_config.toml"), "rb").read())
put("runtime", "config", "settings", """[agent]
model = "anthropic:claude-sonnet-4-5"
max_steps_per_turn = 40

[trust]
mode = "auto"

[sandbox]
mode = "required"

[budgets.turn]
tokens = 200000
\0agent.max_steps_per_turn=12""")
put("runtime", "config", "wrong_key", "[agent]\nmodle = \"x\"\n\0log.filter=debug")
# Found by fuzzing: a space, then a multi-byte character, in a log directive.
put("runtime", "config", "log_filter_accent", "[log]\nfilter = \"info, caf\u00e9=trace\"\n\0log.filter= \u00e9=debug")
put("runtime", "models", "example", """[models.local]
api = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "qwen2.5:7b"
context_window = 32768

[models.claude]
api = "anthropic"
key_env = "ANTHROPIC_API_KEY"
model = "claude-sonnet-4-5"
max_output_tokens = 8192
""")
put("runtime", "models", "bad", "[models.x]\napi = \"gopher\"\nmodel = 3\n")

# --- runtime: scripted-model files
put("runtime", "scripted", "hello", """{"turns": [
  {"text": "Let me read your list.",
   "tool_calls": [{"name": "read_file", "arguments": {"path": "todo.txt"}}]},
  {"text": "Two things: buy milk, and call Ada.", "expect": "call Ada",
   "usage": {"input_tokens": 10, "output_tokens": 5}}
]}""")
put("runtime", "scripted", "fail", '{"turns": [{"fail": "overloaded"}, {"text": "ok"}]}')

# --- runtime: commands the gate judges
for i, command in enumerate([
    "ls -la ~/projects | grep -v node_modules > /tmp/out.txt 2>&1",
    "cd build && make -j2 && ./run-tests.sh --quick",
    "curl -fsSL https://example.invalid/install.sh | sh",
    "rm -rf \"$HOME\"/.troupe/*.db; echo done",
    "for f in *.txt; do sed -i 's/a/b/g' \"$f\"; done",
    "bash -c 'cat <<EOF > notes.md\nhello $(date)\nEOF'",
    "f() { git push --force origin \"${1:-main}\"; }; f",
    "python3 -c 'import os; os.remove(\"x\")' && find . -name '*.pyc' -delete",
    "dd if=/dev/zero of=/dev/sda bs=1M count=1 & wait",
    "echo `whoami` $((1+2)) <(ls) >> ~/.bashrc",
]):
    put("runtime", "shell", f"command_{i}", command)

# --- tools: paths (relative or absolute, as a model writes them)
for i, path in enumerate([
    "notes/todo.txt", "../outside/file", "/etc/passwd", "~/.ssh/id_rsa", "./a/./b/../c",
    "link/../secret", "loop/x", "dangling", "home/config.toml", "home/models.toml",
    "home/memory/MEMORY.md", "//double//slash/", "caf\u00e9/\u00e9t\u00e9.md", "a" * 300,
    # Found by fuzzing: a missing folder, then .., then a link into the home.
    "todo.txtlink/../secret", "nope/../home/models.toml",
]):
    put("tools", "paths", f"path_{i}", path)

# --- tools: documents
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
RELS = '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>'
put("tools", "docx", "report.docx", package([
    ("[Content_Types].xml", "<Types/>"),
    ("_rels/.rels", RELS),
    ("word/document.xml", f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document {W}><w:body>
<w:p><w:pPr><w:pStyle w:val="Titre1"/></w:pPr><w:r><w:t>Quarterly report</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">Sales rose </w:t></w:r><w:r><w:t>12% &amp; costs fell.</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>Hire</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="1"/><w:numId w:val="2"/></w:numPr></w:pPr><w:r><w:t>two</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Total</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:p><w:r><w:t>North|East</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>40</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
<w:p><w:r><w:t>Deleted:</w:t></w:r><w:del><w:r><w:delText>gone</w:delText></w:r></w:del><w:r><w:tab/><w:br/><w:t>end</w:t></w:r></w:p>
</w:body></w:document>"""),
    ("word/styles.xml", f'<w:styles {W}><w:style w:type="paragraph" w:styleId="Titre1"><w:name w:val="heading 1"/></w:style></w:styles>'),
    ("word/numbering.xml", f'<w:numbering {W}><w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum><w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="1"><w:numFmt w:val="decimal"/></w:lvl></w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num></w:numbering>'),
]))

P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
def shape(ph, paras):
    return f'<p:sp><p:nvSpPr><p:cNvPr id="2" name="s"/><p:cNvSpPr/><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/>{paras}</p:txBody></p:sp>'
def slide(shapes):
    return f'<p:sld {P}><p:cSld><p:spTree><p:nvGrpSpPr/><p:grpSpPr/>{shapes}</p:spTree></p:cSld></p:sld>'
put("tools", "pptx", "deck.pptx", package([
    ("ppt/presentation.xml", f'<p:presentation {P}><p:sldIdLst><p:sldId id="256" r:id="rId3"/><p:sldId id="257" r:id="rId2"/></p:sldIdLst></p:presentation>'),
    ("ppt/_rels/presentation.xml.rels", '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide1.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide2.xml"/></Relationships>'),
    ("ppt/slides/slide1.xml", slide(shape("", "<a:p><a:r><a:t>A loose note</a:t></a:r></a:p>") + '<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Item</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>Cost</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>')),
    ("ppt/slides/slide2.xml", slide(shape('<p:ph type="ctrTitle"/>', "<a:p><a:r><a:t>Roadmap</a:t></a:r></a:p>") + shape('<p:ph idx="1"/>', '<a:p><a:r><a:t>Q1: beta</a:t></a:r></a:p><a:p><a:pPr lvl="1"/><a:r><a:t>invite users</a:t></a:r></a:p>'))),
]))

S = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
put("tools", "xlsx", "budget.xlsx", package([
    ("[Content_Types].xml", '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>'),
    ("_rels/.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>'),
    ("xl/workbook.xml", f'<?xml version="1.0" encoding="UTF-8"?><workbook {S} xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Costs" sheetId="1" r:id="rId1"/></sheets></workbook>'),
    ("xl/_rels/workbook.xml.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>'),
    ("xl/sharedStrings.xml", f'<?xml version="1.0" encoding="UTF-8"?><sst {S} count="3" uniqueCount="3"><si><t>Item</t></si><si><t>Cost</t></si><si><t>Rent</t></si></sst>'),
    ("xl/worksheets/sheet1.xml", f'<?xml version="1.0" encoding="UTF-8"?><worksheet {S}><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row><row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><v>1200</v></c></row><row r="3"><c r="C3" t="b"><v>1</v></c><c r="D3"><f>B2*2</f><v>2400</v></c></row></sheetData></worksheet>'),
]))

# Found by fuzzing: a forged count of shared strings made calamine's allocation abort.
put("tools", "xlsx", "forged_count.xlsx", package([
    ("_rels/.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>'),
    ("xl/workbook.xml", f'<?xml version="1.0" encoding="UTF-8"?><workbook {S} xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="A" sheetId="1" r:id="rId1"/></sheets></workbook>'),
    ("xl/_rels/workbook.xml.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'),
    ("xl/sharedStrings.xml", f'<?xml version="1.0" encoding="UTF-8"?><sst {S} count="1" uniqueCount="128849018889"><si><t>x</t></si></sst>'),
    ("xl/worksheets/sheet1.xml", f'<?xml version="1.0" encoding="UTF-8"?><worksheet {S}><sheetData/></worksheet>'),
]))

# Found by fuzzing: cells with forged far-apart references made calamine's
# dense range ask for hundreds of GB at once, and the failure aborted.
put("tools", "xlsx", "forged_refs.xlsx", package([
    ("_rels/.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>'),
    ("xl/workbook.xml", f'<?xml version="1.0" encoding="UTF-8"?><workbook {S} xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="A" sheetId="1" r:id="rId1"/></sheets></workbook>'),
    ("xl/_rels/workbook.xml.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'),
    ("xl/worksheets/sheet1.xml", f'<?xml version="1.0" encoding="UTF-8"?><worksheet {S}><dimension ref="A1:XFD1048576"/><sheetData><row r="1"><c r="A1"><v>1</v></c></row><row r="1048576"><c r="XFD1048576"><v>2</v></c></row></sheetData></worksheet>'),
]))

# .xls: a BIFF8 workbook stream inside an OLE compound file (CFB, version 3,
# 512-byte sectors), written by hand so the seeds need no library.
import struct


def record(typ, data=b""):
    return struct.pack("<HH", typ, len(data)) + data


def bof(kind):  # BIFF8 BOF: 0x0005 workbook globals, 0x0010 worksheet
    return record(0x0809, struct.pack("<HHHHII", 0x0600, kind, 0x0DBB, 0x07CC, 0xC1, 0x06))


EOF = record(0x000A)


def xl_string(text):  # XLUnicodeString, 8-bit characters
    return struct.pack("<HB", len(text), 0) + text.encode("latin-1")


def cell(typ, row, col, rest):
    return record(typ, struct.pack("<HHH", row, col, 0) + rest)


def workbook(sheets, strings=(), pad_to=0):
    """A workbook stream: globals (BOF, code page, one BoundSheet8 per sheet,
    the shared strings, EOF), then each sheet's records between BOF and EOF."""
    def globals_(positions):
        out = bof(0x0005) + record(0x0042, struct.pack("<H", 1200))
        for (name, _), pos in zip(sheets, positions):
            out += record(0x0085, struct.pack("<IBBBB", pos, 0, 0, len(name), 0) + name.encode("latin-1"))
        if strings:
            sst = struct.pack("<II", len(strings), len(strings))
            for text in strings:
                sst += xl_string(text)
            out += record(0x00FC, sst)
        return out + EOF
    bodies = [bof(0x0010) + body + EOF for _, body in sheets]
    at = len(globals_([0] * len(sheets)))
    positions = []
    for body in bodies:
        positions.append(at)
        at += len(body)
    stream = globals_(positions) + b"".join(bodies)
    return stream + b"\0" * max(0, pad_to - len(stream))


def compound(stream):
    """An OLE compound file holding `stream` as "Workbook": in the mini
    stream when under 4096 bytes, as the format wants, else in sectors."""
    FREE, END, FATSECT, NOSTREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
    fat = [FATSECT, END]  # sector 0: the FAT, sector 1: the directory
    body = b""

    def chain(n):
        first = len(fat)
        fat.extend(range(first + 1, first + n))
        fat.append(END)
        return first

    def sectors(data, size):
        data += b"\0" * (-len(data) % size)
        return data, len(data) // size

    minifat_start, minifat_count, root_start, root_size = END, 0, END, 0
    if len(stream) < 4096:
        mini, n = sectors(stream, 64)
        minifat = list(range(1, n)) + [END]
        minifat_sector = struct.pack("<128I", *(minifat + [FREE] * (128 - n)))
        minifat_start, minifat_count = chain(1), 1
        container, m = sectors(mini, 512)
        root_start, root_size = chain(m), len(mini)
        body = minifat_sector + container
        start = 0
    else:
        data, n = sectors(stream, 512)
        start = chain(n)
        body = data
    assert len(fat) <= 128

    def entry(name, kind, child, start, size):
        raw = name.encode("utf-16-le") + b"\0\0"
        return (raw.ljust(64, b"\0") + struct.pack("<HBBIII", len(raw), kind, 1, NOSTREAM, NOSTREAM, child)
                + b"\0" * 36 + struct.pack("<IIi", start, size, 0))

    directory = (entry("Root Entry", 5, 1, root_start, root_size)
                 + entry("Workbook", 2, NOSTREAM, start, len(stream))
                 + (b"\0" * 64 + struct.pack("<HBBIII", 0, 0, 0, NOSTREAM, NOSTREAM, NOSTREAM) + b"\0" * 48) * 2)
    header = (b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1" + b"\0" * 16
              + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6) + b"\0" * 6
              + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, minifat_start, minifat_count, END, 0)
              + struct.pack("<I", 0) + struct.pack("<108I", *([FREE] * 108)))
    assert len(header) == 512 and len(directory) == 512
    return header + struct.pack("<128I", *(fat + [FREE] * (128 - len(fat)))) + directory + body


def number(row, col, value):
    return cell(0x0203, row, col, struct.pack("<d", value))


costs = (
    cell(0x00FD, 0, 0, struct.pack("<I", 0)) + cell(0x00FD, 0, 1, struct.pack("<I", 1))
    + cell(0x00FD, 1, 0, struct.pack("<I", 2))
    + cell(0x027E, 1, 1, struct.pack("<I", (1200 << 2) | 2))  # RK: an integer
    + number(2, 1, 2.5)
    # MULRK: row 3, columns 0 and 1
    + record(0x00BD, struct.pack("<HHHIHIH", 3, 0, 0, (7 << 2) | 2, 0, (8 << 2) | 2, 1))
    # FORMULA with a number, then one with a string (its STRING record follows)
    + cell(0x0006, 4, 0, struct.pack("<dHI", 15.0, 0, 0) + struct.pack("<HBH", 3, 0x1E, 15))
    + cell(0x0006, 4, 1, b"\0\0\0\0\0\0\xFF\xFF" + struct.pack("<HI", 0, 0)
           + struct.pack("<HBBB", 8, 0x17, 5, 0) + b"total")
    + record(0x0207, xl_string("total"))
    + cell(0x0205, 5, 0, struct.pack("<BB", 1, 0))  # BOOLERR: TRUE
    + cell(0x0204, 5, 1, xl_string("note"))  # LABEL
)
put("tools", "xls", "budget.xls", compound(workbook(
    [("Costs", costs), ("Empty", b"")], strings=("Item", "Cost", "Rent"), pad_to=4096)))

# Two cells at forged far-apart references (A1 and the last row and column a
# BIFF8 cell can name): calamine's dense range asked for 4 billion cells.
put("tools", "xls", "forged_refs.xls", compound(workbook(
    [("A", number(0, 0, 1) + number(65535, 65535, 2))])))

# A forged DIMENSIONS record (4 billion rows by 65535 columns): calamine
# reserved room for every cell it names before reading one.
put("tools", "xls", "forged_dimensions.xls", compound(workbook(
    [("A", record(0x0200, struct.pack("<IIHHH", 0, 0xFFFFFFFF, 0, 0xFFFF, 0)) + number(0, 0, 1))])))

ODF = 'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"'
put("tools", "odt", "minutes.odt", package([
    ("mimetype", "application/vnd.oasis.opendocument.text"),
    ("content.xml", f"""<office:document-content {ODF}>
<office:automatic-styles><text:list-style style:name="L2"><text:list-level-style-number text:level="1"/></text:list-style></office:automatic-styles>
<office:body><office:text>
<text:h text:outline-level="1">Minutes</text:h>
<text:p>Present: Ann<text:s text:c="2"/>and Bob<text:line-break/>Absent: none<text:tab/></text:p>
<text:list text:style-name="L1"><text:list-item><text:p>Budget</text:p><text:list><text:list-item><text:p>approved</text:p></text:list-item></text:list></text:list-item></text:list>
<text:list text:style-name="L2"><text:list-item><text:p>First</text:p></text:list-item></text:list>
<table:table><table:table-row><table:table-cell><text:p>A</text:p></table:table-cell><table:table-cell table:number-columns-repeated="3"><text:p>B</text:p></table:table-cell></table:table-row>
<table:table-row table:number-rows-repeated="2"><table:table-cell/></table:table-row></table:table>
</office:text></office:body></office:document-content>"""),
]))
put("tools", "odt", "launch.odp", package([
    ("mimetype", "application/vnd.oasis.opendocument.presentation"),
    ("content.xml", f"""<office:document-content {ODF}><office:body><office:presentation>
<draw:page draw:name="p1"><draw:frame presentation:class="title"><draw:text-box><text:p>Launch</text:p></draw:text-box></draw:frame>
<draw:frame presentation:class="outline"><draw:text-box><text:list><text:list-item><text:p>Date set</text:p></text:list-item></text:list></draw:text-box></draw:frame></draw:page>
<draw:page draw:name="p2"><draw:frame><draw:text-box><text:p>Thanks</text:p></draw:text-box></draw:frame></draw:page>
</office:presentation></office:body></office:document-content>"""),
]))

def chapter(body):
    return f'<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title><style>p {{ color: red }}</style></head><body>{body}</body></html>'
CH1 = chapter('<h1>Chapter One</h1><p>It was a <em>dark</em>\n and stormy&nbsp;night.</p><ul><li>rain<ul><li>cold</li></ul></li><li>wind</li></ul>')
CH2 = chapter('<h2>Chapter Two</h2><div>Loose text<p>Inner<br/>line</p></div><ol><li>first</li></ol><blockquote><p>Quoted</p></blockquote><pre>let x = 1;\nlet y = 2;</pre><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>')
put("tools", "epub", "book.epub", package([
    ("mimetype", "application/epub+zip"),
    ("META-INF/container.xml", '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>'),
    ("OEBPS/content.opf", '<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest><item id="c2" href="text/ch%202.xhtml" media-type="application/xhtml+xml"/><item id="c1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>'),
    ("OEBPS/text/ch1.xhtml", CH1),
    ("OEBPS/text/ch 2.xhtml", CH2),
]))
put("tools", "xhtml", "chapter_one.xhtml", CH1)
put("tools", "xhtml", "chapter_two.xhtml", CH2)

put("tools", "rtf", "notes.rtf", r"""{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Arial;}{\f1 Symbol;}}{\colortbl;\red0\green0\blue0;}
{\stylesheet{\s1 heading 1;}}{\info{\title Secret title}{\author Ann}}
{\*\generator Writer}\pard\s1\outlinelevel0 Caf\'e9 notes\par
\pard Plain text with \{braces\}, a \\ backslash and \u8364? euros.\par
\pard {\pict\pngblip 89504e47}Emoji \u-10179?\u-8704? here\line next line\par
{\listtext\f1 \'b7\tab}\pard\ilvl0 Bullet one\par
{\listtext 1.\tab}\pard Numbered\par
\trowd\cellx1000\cellx2000\pard\intbl Name\cell Age\cell\row
\trowd\cellx1000\cellx2000\pard\intbl Ann\cell 41\cell\row
\pard After the table.\par
}""")
put("tools", "rtf", "codepage.rtf", r"{\rtf1\ansi\ansicpg1251{\fonttbl{\f0\fcharset204 Times;}}\f0 \'cf\'f0\'e8\'e2\'e5\'f2\bin3 abc\par}")


def pdf(pages):
    objects = ["<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, text in enumerate(pages):
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>")
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects):
        offsets.append(len(out))
        out += f"{i + 1} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


# --- tools: OpenDocument spreadsheets. calamine reads them whole, copying a
# cell per repeated column and laying every repeated row out densely.
def ods(body):
    return package([
        ("mimetype", "application/vnd.oasis.opendocument.spreadsheet"),
        ("META-INF/manifest.xml", '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
         '<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
         '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>'),
        ("content.xml", f"""<office:document-content {ODF}><office:body><office:spreadsheet>
{body}
</office:spreadsheet></office:body></office:document-content>"""),
    ])


put("tools", "ods", "budget.ods", ods("""<table:table table:name="Budget">
<table:table-row><table:table-cell office:value-type="string"><text:p>Item</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Cost</text:p></table:table-cell></table:table-row>
<table:table-row><table:table-cell office:value-type="string"><text:p>Rent</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="1200"><text:p>1200</text:p></table:table-cell></table:table-row>
<table:table-row table:number-rows-repeated="1000"><table:table-cell table:number-columns-repeated="64"/></table:table-row>
</table:table>
<table:table table:name="Notes"><table:table-row><table:table-cell office:value-type="string"><text:p>ok</text:p></table:table-cell></table:table-row></table:table>"""))
# One used cell repeated across every column of a million rows: 17 billion
# cells laid out.
put("tools", "ods", "forged_repeats.ods", ods("""<table:table table:name="A">
<table:table-row table:number-rows-repeated="1048576"><table:table-cell office:value-type="string" table:number-columns-repeated="16384"><text:p>x</text:p></table:table-cell></table:table-row>
</table:table>"""))
# Two used cells far apart: a dense range between them.
put("tools", "ods", "forged_far_apart.ods", ods("""<table:table table:name="A">
<table:table-row><table:table-cell office:value-type="string"><text:p>a</text:p></table:table-cell></table:table-row>
<table:table-row table:number-rows-repeated="1000000"><table:table-cell/></table:table-row>
<table:table-row><table:table-cell table:number-columns-repeated="16000"/><table:table-cell office:value-type="string"><text:p>b</text:p></table:table-cell></table:table-row>
</table:table>"""))

put("tools", "pdf", "two_pages.pdf", pdf(["Hello from page one", "Second page text"]))

# --- actors: routine schedules
for i, schedule in enumerate([
    "every 30m", "every 2 hours", "every day at 9:00", "weekdays at 17:30", "mon,wed,fri at 8am",
    "0 9 * * 1-5", "*/15 * * * *", "in 10 minutes", "2026-12-24 18:00", "at 7:45",
    "every sunday at 23:59", "30 2 29 2 *",
    # Found by fuzzing: an interval so long its second run overflowed the date.
    "every 9999999W9s",
]):
    # The first byte picks the time zone.
    put("actors", "schedule", f"schedule_{i}", bytes([i % 4]) + schedule.encode())
